//! Quoting for the three formats bully writes values into, each by its reader's rules:
//! - a `postgresql.conf` string (PostgreSQL's config lexer, `guc-file.l`): inside
//!   `'…'`, a backslash escapes (`\\`, `\'`, `\n`, `\r`, octal …) and `''` is a quote;
//!   a raw newline ends the line, so it is never written raw;
//! - a libpq connection-string value (`conninfo_parse`): inside `'…'`, `\` escapes the
//!   next character, so `\\` and `\'`;
//! - a pgpass field (`passwordFromFile`): `\` escapes the next character, so `\\` and
//!   `\:`; a line cannot hold a newline at all.
//!
//! A value nested in two of them (`primary_conninfo = '… user=…'`) is quoted by the
//! inner rules first, then the outer. The tests decode each format the way its reader
//! does and check every value comes back exactly; `secrets::tests` reads values back
//! from a real server.

/// Characters no quoting can carry through the C strings PostgreSQL and libpq keep.
const NUL: char = '\0';

/// `value` as a `postgresql.conf` string literal; `None` when it holds a NUL.
pub fn conf_string(value: &str) -> Option<String> {
    if value.contains(NUL) {
        return None;
    }
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("''"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out.push('\'');
    Some(out)
}

/// `value` quoted for a libpq connection string (single quotes, `\` and `'` escaped).
pub fn conninfo_value(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// `value` as one field of a pgpass line (`\` and `:` escaped); `None` when it holds
/// what a pgpass line cannot (a newline, a carriage return, a NUL).
pub fn pgpass_field(value: &str) -> Option<String> {
    if value.contains(['\n', '\r', NUL]) {
        return None;
    }
    Some(value.replace('\\', "\\\\").replace(':', "\\:"))
}

/// The config lexer's and libpq's readers, written from their C sources to test the
/// writers above against.
#[cfg(test)]
pub mod readers {
    /// A `postgresql.conf` string literal as PostgreSQL's lexer reads it (the STRING
    /// token of `guc-file.l`, then `DeescapeQuotedString`); `None` when the lexer would
    /// not take it as one whole token.
    pub fn conf_string(literal: &str) -> Option<String> {
        let bytes = literal.as_bytes();
        if bytes.len() < 2 || bytes[0] != b'\'' || bytes[bytes.len() - 1] != b'\'' {
            return None;
        }
        let inner = &bytes[1..bytes.len() - 1];
        let mut out = Vec::new();
        let mut i = 0;
        while i < inner.len() {
            match inner[i] {
                b'\n' => return None,
                b'\\' => {
                    let next = *inner.get(i + 1)?;
                    if next == b'\n' {
                        return None;
                    }
                    i += 1;
                    match next {
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'0'..=b'7' => {
                            let mut octal = 0u32;
                            let mut k = 0;
                            while k < 3 && matches!(inner.get(i + k), Some(b'0'..=b'7')) {
                                octal = octal * 8 + (inner[i + k] - b'0') as u32;
                                k += 1;
                            }
                            i += k - 1;
                            out.push(octal as u8);
                        }
                        other => out.push(other),
                    }
                }
                b'\'' => {
                    // Only a doubled quote stays inside the token.
                    if inner.get(i + 1) != Some(&b'\'') {
                        return None;
                    }
                    i += 1;
                    out.push(b'\'');
                }
                other => out.push(other),
            }
            i += 1;
        }
        String::from_utf8(out).ok()
    }

    /// The keyword/value pairs of a connection string as libpq's `conninfo_parse`
    /// reads them; `None` on what it refuses.
    pub fn conninfo(text: &str) -> Option<Vec<(String, String)>> {
        let mut chars = text.chars().peekable();
        let mut pairs = Vec::new();
        loop {
            while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                chars.next();
            }
            if chars.peek().is_none() {
                return Some(pairs);
            }
            let mut key = String::new();
            while let Some(&c) = chars.peek() {
                if c == '=' || c.is_ascii_whitespace() {
                    break;
                }
                key.push(c);
                chars.next();
            }
            while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                chars.next();
            }
            if chars.next() != Some('=') {
                return None;
            }
            while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                chars.next();
            }
            let mut value = String::new();
            if chars.peek() == Some(&'\'') {
                chars.next();
                loop {
                    match chars.next()? {
                        '\\' => value.push(chars.next()?),
                        '\'' => break,
                        c => value.push(c),
                    }
                }
            } else {
                while let Some(c) = chars.next() {
                    match c {
                        c if c.is_ascii_whitespace() => break,
                        '\\' => value.extend(chars.next()),
                        c => value.push(c),
                    }
                }
            }
            pairs.push((key, value));
        }
    }

    /// The password a pgpass line gives `user` (host, port and database `*`), as
    /// libpq's `passwordFromFile` reads it.
    pub fn pgpass_password(line: &str, user: &str) -> Option<String> {
        let mut rest = line;
        for token in ["*", "*", "*", user] {
            rest = matches_field(rest, token)?;
        }
        let mut out = String::new();
        let mut chars = rest.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                ':' => break,
                '\\' if chars.peek().is_some() => out.extend(chars.next()),
                c => out.push(c),
            }
        }
        Some(out)
    }

    /// `pwdfMatchesString`: the rest of `field…` after `token` and its colon.
    fn matches_field<'a>(field: &'a str, token: &str) -> Option<&'a str> {
        if let Some(rest) = field.strip_prefix("*:") {
            return Some(rest);
        }
        let mut chars = field.char_indices();
        let mut wanted = token.chars();
        while let Some((i, mut c)) = chars.next() {
            let mut escaped = false;
            if c == '\\' {
                c = chars.next()?.1;
                escaped = true;
            }
            match wanted.next() {
                None if c == ':' && !escaped => return Some(&field[i + 1..]),
                Some(w) if w == c => {}
                _ => return None,
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Strings rich in what each format escapes: quotes, backslashes, colons, spaces,
    /// newlines, tabs, `=`, and non-ASCII.
    fn tricky() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just('\''),
                Just('\\'),
                Just('"'),
                Just(':'),
                Just(' '),
                Just('\n'),
                Just('\r'),
                Just('\t'),
                Just('='),
                Just('é'),
                Just('ß'),
                Just('漢'),
                Just('0'),
                Just('7'),
                Just('n'),
                any::<char>().prop_filter("no NUL", |c| *c != '\0'),
            ],
            0..24,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    proptest! {
        #[test]
        fn a_conf_string_reads_back_exactly(value in tricky()) {
            let literal = conf_string(&value).unwrap();
            prop_assert!(!literal.contains('\n'), "{literal:?}");
            prop_assert_eq!(readers::conf_string(&literal), Some(value));
        }

        #[test]
        fn a_conninfo_value_reads_back_exactly(value in tricky()) {
            let text = format!("host=10.0.0.1 user={} port=5432", conninfo_value(&value));
            let pairs = readers::conninfo(&text).unwrap();
            prop_assert_eq!(&pairs[1], &("user".to_string(), value));
            prop_assert_eq!(&pairs[2], &("port".to_string(), "5432".to_string()));
        }

        #[test]
        fn a_conninfo_nested_in_a_conf_string_reads_back_exactly(
            user in tricky(),
            passfile in tricky(),
        ) {
            let conninfo = format!(
                "host=::1 port=5 user={} passfile={}",
                conninfo_value(&user),
                conninfo_value(&passfile)
            );
            let literal = conf_string(&conninfo).unwrap();
            let read = readers::conf_string(&literal).unwrap();
            let pairs = readers::conninfo(&read).unwrap();
            prop_assert_eq!(&pairs[2].1, &user);
            prop_assert_eq!(&pairs[3].1, &passfile);
        }

        #[test]
        fn a_pgpass_line_gives_back_the_password(user in tricky(), password in tricky()) {
            let (Some(u), Some(p)) = (pgpass_field(&user), pgpass_field(&password)) else {
                prop_assert!(user.contains(['\n', '\r']) || password.contains(['\n', '\r']));
                return Ok(());
            };
            let line = format!("*:*:*:{u}:{p}");
            prop_assert_eq!(readers::pgpass_password(&line, &user), Some(password));
            let other = format!("{user}x");
            prop_assert_eq!(readers::pgpass_password(&line, &other), None);
        }
    }

    #[test]
    fn the_issue_49_password_is_quoted_for_both_readers() {
        let conninfo = format!("user={}", conninfo_value("re'pl\\ica"));
        assert_eq!(conninfo, "user='re\\'pl\\\\ica'");
        let literal = conf_string(&conninfo).unwrap();
        assert_eq!(literal, "'user=''re\\\\''pl\\\\\\\\ica'''");
        // What bully wrote before: the lexer ends the string early.
        assert_eq!(readers::conf_string("'password=''re\\''pl\\\\ica'''"), None);
    }

    #[test]
    fn what_no_format_can_carry_is_refused() {
        assert_eq!(conf_string("a\0b"), None);
        assert_eq!(pgpass_field("a\nb"), None);
        assert_eq!(pgpass_field("a\rb"), None);
        assert_eq!(pgpass_field("a:b\\c").as_deref(), Some("a\\:b\\\\c"));
    }
}
