//! The forms a `read` grant compares a request's path and query in, so that no spelling a
//! server reads as the same thing slips past: the comparison form (percent-decoded until
//! nothing more decodes, ASCII case folded) and the plain path (one a server can read only one
//! way: no dot or empty segments, no `;params`, no escapes of separators).

use percent_encoding::percent_decode;

/// Decoding passes tried before giving up: `%25` nested this deep is no spelling a server
/// needs, so text still decoding after it has no comparison form and is refused.
pub const MAX_DECODE_PASSES: usize = 4;

/// `text` percent-decoded until a pass changes nothing (so `%252D`, `%2D` and `%2d` are all
/// `-`; with `plus_is_space`, as in a query, `+` is a space too) and ASCII lower-cased; bytes
/// that are not UTF-8 are kept as U+FFFD. `None` when it still decodes after
/// [`MAX_DECODE_PASSES`].
pub fn comparison_form(text: &str, plus_is_space: bool) -> Option<String> {
    let mut bytes = text.as_bytes().to_vec();
    for _ in 0..=MAX_DECODE_PASSES {
        if plus_is_space {
            for b in &mut bytes {
                if *b == b'+' {
                    *b = b' ';
                }
            }
        }
        let next: Vec<u8> = percent_decode(&bytes).collect();
        if next == bytes {
            let mut text = String::from_utf8_lossy(&next).into_owned();
            text.make_ascii_lowercase();
            return Some(text);
        }
        bytes = next;
    }
    None
}

/// Bytes that may not appear in a plain path segment once its escapes are decoded: what
/// separates segments or parameters in some server (`/`, `\`, `;`), what starts a query or
/// fragment, and `%` (an escape of an escape, read differently by servers that decode twice).
const NOT_PLAIN: &[u8] = b"/\\;%?#";

/// The segments of `path` when it is plain: it starts with `/`, every segment is non-empty
/// (no `//`, no trailing `/`), none is `.` or `..` (spelled with escapes or not), and none
/// holds, after decoding its escapes once, a control byte or any of `/ \ ; % ? #`. Then every
/// server reads it as the same segments. The segments are returned as sent (not decoded).
pub fn plain_segments(path: &str) -> Option<Vec<&str>> {
    let rest = path.strip_prefix('/')?;
    rest.split('/')
        .map(|seg| {
            let decoded: Vec<u8> = percent_decode(seg.as_bytes()).collect();
            let plain = !decoded.is_empty()
                && decoded != b"."
                && decoded != b".."
                && decoded
                    .iter()
                    .all(|b| *b >= 0x20 && *b != 0x7f && !NOT_PLAIN.contains(b));
            plain.then_some(seg)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparison_form_decodes_until_nothing_changes_and_folds_case() {
        for spelled in [
            "git-receive-pack",
            "GIT-RECEIVE-PACK",
            "git%2Dreceive-pack",
            "git%2dreceive-pack",
            "git%252Dreceive-pack",
            "git%25252dreceive%2Dpack",
            "%67it-receive-pack",
        ] {
            assert_eq!(
                comparison_form(spelled, false).as_deref(),
                Some("git-receive-pack"),
                "{spelled}"
            );
        }
        assert_eq!(
            comparison_form("service%3Dgit+receive%2Bpack", true).as_deref(),
            Some("service=git receive pack")
        );
        assert_eq!(comparison_form("a+b", false).as_deref(), Some("a+b"));
        assert_eq!(comparison_form("100%", false).as_deref(), Some("100%"));
        assert_eq!(comparison_form("%zz", false).as_deref(), Some("%zz"));
        assert_eq!(comparison_form("%2525252525", false), None, "too deep");
        assert_eq!(comparison_form("%FF", false).as_deref(), Some("\u{fffd}"));
    }

    #[test]
    fn plain_paths_have_one_reading() {
        assert_eq!(
            plain_segments("/r.git/git-upload-pack"),
            Some(vec!["r.git", "git-upload-pack"])
        );
        assert_eq!(
            plain_segments("/~me/my%20repo.git/git-upload-pack"),
            Some(vec!["~me", "my%20repo.git", "git-upload-pack"])
        );
        for odd in [
            "",
            "r.git/git-upload-pack",
            "/",
            "/r.git/git-upload-pack/",
            "/r.git//git-upload-pack",
            "/r.git/./git-upload-pack",
            "/x/../git-upload-pack",
            "/x/%2e%2E/git-upload-pack",
            "/x/%2E/git-upload-pack",
            "/r.git/git-upload-pack;v=1",
            "/r.git%3B/git-upload-pack",
            "/r.git%2Fgit-upload-pack",
            "/r.git%5cx/git-upload-pack",
            "/r.git\\x/git-upload-pack",
            "/r.git%252F/git-upload-pack",
            "/r.git%3F/git-upload-pack",
            "/r.git%23/git-upload-pack",
            "/r.git%00/git-upload-pack",
            "/r.git%7F/git-upload-pack",
        ] {
            assert_eq!(plain_segments(odd), None, "{odd}");
        }
    }
}
