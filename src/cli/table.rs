//! Aligned text tables for the commands that list things (`certs show`,
//! `status --cluster`): one renderer so every list looks alike.

/// Renders rows (the first is the header) with each column padded to its widest cell,
/// two spaces between columns and no trailing spaces.
pub fn render<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            let pad = width - cell.chars().count();
            line.extend(std::iter::repeat(' ').take(pad));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_line_up_without_trailing_spaces() {
        let rows = [
            ["A".to_string(), "BB".to_string(), "C".to_string()],
            ["long".to_string(), "x".to_string(), "".to_string()],
        ];
        assert_eq!(super::render(&rows), "A     BB  C\nlong  x\n");
    }
}
