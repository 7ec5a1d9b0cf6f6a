//! Reading bash's `declare -px` output back into variables.
//!
//! The session wrapper reports exported variables with the `declare -px`
//! builtin (no process started, unlike `env`). Bash prints one declaration
//! per variable:
//!
//! ```text
//! declare -x NAME="value with \" \\ \$ \` escaped"
//! declare -x NAME=$'ANSI-C quoted: \n \t \001 \377 \' \\'
//! declare -rx NAME="…"          (other attributes before the x)
//! declare -x NAME               (exported, but without a value)
//! declare -ax NAME=([0]="…")    (arrays: never passed to children)
//! ```
//!
//! Values come back as raw bytes: `$'…'` can encode bytes that are not UTF-8.

/// Parse `declare -px` output into `(name, value)` pairs of exported
/// scalars with values, in order. Unparsable declarations are skipped.
pub fn parse_declarations(text: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut p = Parser { s: text, i: 0 };
    while p.i < p.s.len() {
        if let Some(decl) = p.declaration() {
            out.extend(decl);
        }
        p.skip_line();
    }
    out
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, lit: &[u8]) -> bool {
        if self.s[self.i..].starts_with(lit) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    /// Skip the rest of the current line (after a parsed or broken declaration).
    fn skip_line(&mut self) {
        while let Some(c) = self.peek() {
            self.i += 1;
            if c == b'\n' {
                break;
            }
        }
    }

    /// One declaration; `Some(None)` for a declaration that carries no
    /// exported scalar value.
    fn declaration(&mut self) -> Option<Option<(String, Vec<u8>)>> {
        if !self.eat(b"declare -") {
            return None;
        }
        let flags_start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            self.i += 1;
        }
        let flags = &self.s[flags_start..self.i];
        if !self.eat(b" ") {
            return None;
        }
        let name_start = self.i;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
        {
            self.i += 1;
        }
        let name = String::from_utf8(self.s[name_start..self.i].to_vec()).ok()?;
        if name.is_empty() || !flags.contains(&b'x') {
            return None;
        }
        if flags.contains(&b'a') || flags.contains(&b'A') || !self.eat(b"=") {
            return Some(None);
        }
        let value = if self.eat(b"\"") {
            self.double_quoted()?
        } else if self.eat(b"$'") {
            self.ansi_c_quoted()?
        } else {
            return None;
        };
        Some(Some((name, value)))
    }

    fn double_quoted(&mut self) -> Option<Vec<u8>> {
        let mut v = Vec::new();
        loop {
            let c = self.peek()?;
            self.i += 1;
            match c {
                b'"' => return Some(v),
                b'\\' => {
                    let n = self.peek()?;
                    if matches!(n, b'"' | b'\\' | b'$' | b'`' | b'\n') {
                        self.i += 1;
                        if n != b'\n' {
                            v.push(n);
                        }
                    } else {
                        v.push(b'\\');
                    }
                }
                _ => v.push(c),
            }
        }
    }

    fn ansi_c_quoted(&mut self) -> Option<Vec<u8>> {
        let mut v = Vec::new();
        loop {
            let c = self.peek()?;
            self.i += 1;
            if c == b'\'' {
                return Some(v);
            }
            if c != b'\\' {
                v.push(c);
                continue;
            }
            let e = self.peek()?;
            self.i += 1;
            match e {
                b'n' => v.push(b'\n'),
                b't' => v.push(b'\t'),
                b'r' => v.push(b'\r'),
                b'a' => v.push(0x07),
                b'b' => v.push(0x08),
                b'e' | b'E' => v.push(0x1b),
                b'f' => v.push(0x0c),
                b'v' => v.push(0x0b),
                b'0'..=b'7' => {
                    let mut n = u32::from(e - b'0');
                    for _ in 0..2 {
                        match self.peek() {
                            Some(d @ b'0'..=b'7') => {
                                n = n * 8 + u32::from(d - b'0');
                                self.i += 1;
                            }
                            _ => break,
                        }
                    }
                    v.push(u8::try_from(n & 0xff).ok()?);
                }
                b'x' => {
                    let mut n = 0u32;
                    for _ in 0..2 {
                        match self.peek().and_then(|d| (d as char).to_digit(16)) {
                            Some(d) => {
                                n = n * 16 + d;
                                self.i += 1;
                            }
                            None => break,
                        }
                    }
                    v.push(u8::try_from(n).ok()?);
                }
                other => v.push(other),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_quoting_styles_and_skips_what_children_never_see() {
        let text = b"declare -x A=$'l1\\nl2\\tt\\001c\"q\\\\b$d`e\\''\n\
declare -x B=\"\"\n\
declare -x C\n\
declare -x D=$'\\377\\376'\n\
declare -rx E=\"ro \\\"q\\\" \\\\ \\$x \\`y\\`\"\n\
declare -ax ARR=([0]=\"a\")\n\
declare -- NOTEXPORTED=\"1\"\n\
garbage line\n\
declare -x F=\"caf\xc3\xa9\"\n";
        let vars = parse_declarations(text);
        let get = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("A").unwrap(), b"l1\nl2\tt\x01c\"q\\b$d`e'");
        assert_eq!(get("B").unwrap(), b"");
        assert_eq!(get("C"), None);
        assert_eq!(get("D").unwrap(), vec![0xff, 0xfe]);
        assert_eq!(get("E").unwrap(), b"ro \"q\" \\ $x `y`");
        assert_eq!(get("ARR"), None);
        assert_eq!(get("NOTEXPORTED"), None);
        assert_eq!(get("F").unwrap(), "café".as_bytes());
        assert_eq!(vars.len(), 5);
    }

    #[test]
    fn round_trips_what_real_bash_prints() {
        let Ok(out) = std::process::Command::new("bash")
            .env_clear()
            .arg("-c")
            .arg("export A=$'x\\ny\\x01\"\\\\$`'\"'\"; export B='plain text'; declare -px")
            .output()
        else {
            return; // no bash on this machine: nothing to compare against
        };
        let vars = parse_declarations(&out.stdout);
        let get = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("A").unwrap(), b"x\ny\x01\"\\$`'");
        assert_eq!(get("B").unwrap(), b"plain text");
    }
}
