//! Reading one parameter from a request's query string (`lag=16MB` in
//! `/replica?lag=16MB`), percent-decoded as a browser or HAProxy may send it
//! (`lag=16%20MB`, `lag=16+MB`). The routes only ever read a value or two, so this is a
//! lookup rather than a parsed map.

/// The first value of `name` in `query` (the part after `?`), decoded; `None` when the
/// parameter is absent. A bare `name` (no `=`) reads as an empty value, which the
/// caller then refuses or accepts like any other.
pub fn param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (decode(key) == name).then(|| decode(value))
    })
}

/// Every parameter whose name starts with `prefix`, the prefix cut off, decoded and in
/// order (`tag_zone=a` for `tag_` gives `("zone", "a")`).
pub fn with_prefix(query: Option<&str>, prefix: &str) -> Vec<(String, String)> {
    let Some(query) = query else {
        return Vec::new();
    };
    query
        .split('&')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = decode(key).strip_prefix(prefix)?.to_string();
            Some((name, decode(value)))
        })
        .collect()
}

/// `+` as a space and `%XX` as its byte; a `%` not followed by two hex digits is kept
/// as written, and bytes that are not UTF-8 become U+FFFD, so any input decodes.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match bytes.get(i + 1..i + 3).and_then(hex_byte) {
                Some(byte) => {
                    out.push(byte);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Two hex digits as a byte (not `from_str_radix`, which would take a sign).
fn hex_byte(digits: &[u8]) -> Option<u8> {
    let value = |d: u8| (d as char).to_digit(16);
    Some((value(digits[0])? * 16 + value(digits[1])?) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_parameter_with_a_prefix() {
        let q = Some("lag=1&tag_zone=a%20b&tag_nosync=true&tags=x");
        assert_eq!(
            with_prefix(q, "tag_"),
            vec![
                ("zone".to_string(), "a b".to_string()),
                ("nosync".to_string(), "true".to_string())
            ]
        );
        assert!(with_prefix(None, "tag_").is_empty());
    }

    #[test]
    fn finds_the_first_value_decoded() {
        let q = Some("pretty&lag=16MB&lag=1");
        assert_eq!(
            param(q, "lag").as_deref(),
            Some("16MB"),
            "the first one wins"
        );
        assert_eq!(param(q, "pretty").as_deref(), Some(""));
        assert_eq!(param(q, "mode"), None);
        assert_eq!(param(None, "lag"), None);
        assert_eq!(param(Some("lag=16%20MB"), "lag").as_deref(), Some("16 MB"));
        assert_eq!(param(Some("lag=16+MB"), "lag").as_deref(), Some("16 MB"));
        assert_eq!(param(Some("l%61g=1"), "lag").as_deref(), Some("1"));
        assert_eq!(param(Some("lag=5%"), "lag").as_deref(), Some("5%"));
        assert_eq!(param(Some("lag=%zz"), "lag").as_deref(), Some("%zz"));
        assert_eq!(param(Some("lag=%+1"), "lag").as_deref(), Some("% 1"));
        assert_eq!(param(Some("lag=%ff"), "lag").as_deref(), Some("\u{fffd}"));
    }
}
