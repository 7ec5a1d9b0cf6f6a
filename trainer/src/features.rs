//! Hashed n-gram features of texts: lowercase word unigrams and bigrams and
//! character trigrams of words, hashed (FNV-1a) into a fixed number of
//! buckets. Deterministic, no vocabulary, works on unseen tasks.

/// Buckets of the feature hash.
pub const BUCKETS: i64 = 1 << 14;

/// Characters of a text read for features (the start of long file contents
/// carries most of the signal, and this bounds the cost per candidate).
const MAX_CHARS: usize = 6_000;

fn fnv(kind: u8, parts: &[&str]) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    eat(kind);
    for p in parts {
        for b in p.bytes() {
            eat(b);
        }
        eat(0xff);
    }
    (h % BUCKETS as u64) as i64
}

/// The feature indices of `text` (with repeats: a bag).
pub fn features(text: &str) -> Vec<i64> {
    let text: String = text
        .chars()
        .take(MAX_CHARS)
        .collect::<String>()
        .to_lowercase();
    let words: Vec<&str> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut out = Vec::with_capacity(words.len() * 4 + 1);
    out.push(fnv(0, &["<bias>"]));
    for (i, w) in words.iter().enumerate() {
        out.push(fnv(1, &[w]));
        if let Some(next) = words.get(i + 1) {
            out.push(fnv(2, &[w, next]));
        }
        let padded = format!("#{w}#");
        let chars: Vec<char> = padded.chars().collect();
        for tri in chars.windows(3) {
            let s: String = tri.iter().collect();
            out.push(fnv(3, &[&s]));
        }
    }
    // Symbols matter in code (`//` versus `/`, `>=` versus `>`): their bigrams too.
    let symbols: Vec<char> = text
        .chars()
        .filter(|c| !c.is_alphanumeric() && !c.is_whitespace())
        .collect();
    for pair in symbols.windows(2) {
        let s: String = pair.iter().collect();
        out.push(fnv(4, &[&s]));
    }
    out
}
