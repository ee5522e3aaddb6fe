//! Payload values out of error texts: a database or a catalog that refuses a
//! value may quote it (DuckDB: `Could not convert string 'abc' to INT64`,
//! `Type INT64 with value 300 can't be cast`). Such texts go to logs, to
//! the sender and to operators, so the value is masked where it is turned
//! into the sink's error; identifiers (double-quoted) and the error's class
//! stay.

const MASK: &str = "***";

/// `text` with every single-quoted literal and the word after `with value `
/// masked. A quote opens a literal only after a character that is not a
/// letter or a digit (`can't` stays), and closes at a quote that is not
/// followed by one; `''` inside a literal is a quote of its own.
pub fn without_values(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let opens = c == '\'' && (i == 0 || !chars[i - 1].is_alphanumeric());
        if opens {
            let mut j = i + 1;
            loop {
                match chars.get(j) {
                    None => break,
                    Some('\'') if chars.get(j + 1) == Some(&'\'') => j += 2,
                    Some('\'') if !chars.get(j + 1).is_some_and(|n| n.is_alphanumeric()) => break,
                    Some(_) => j += 1,
                }
            }
            out.push('\'');
            out.push_str(MASK);
            if j < chars.len() {
                out.push('\'');
            }
            i = j + 1;
            continue;
        }
        out.push(c);
        i += 1;
        if out.ends_with("with value ") {
            while i < chars.len() && !chars[i].is_whitespace() {
                i += 1;
            }
            out.push_str(MASK);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::without_values;

    #[test]
    fn quoted_values_are_masked_and_the_rest_stays() {
        assert_eq!(
            without_values("Conversion Error: Could not convert string 'sekr3t value' to INT64"),
            "Conversion Error: Could not convert string '***' to INT64"
        );
        assert_eq!(
            without_values(
                "Conversion Error: Type INT64 with value 3000000000 can't be cast to INT32"
            ),
            "Conversion Error: Type INT64 with value *** can't be cast to INT32"
        );
        assert_eq!(
            without_values("Binder Error: column \"amount\" of 'it''s' and 'o'brien'"),
            "Binder Error: column \"amount\" of '***' and '***'"
        );
        assert_eq!(without_values("unterminated 'abc"), "unterminated '***");
        assert_eq!(without_values("no values here"), "no values here");
    }
}
