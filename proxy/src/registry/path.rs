//! A registry request's path as the package rules judge it, and the one spelling of it the
//! origin is sent. The path is split on `/` before each segment is percent-decoded, and a
//! decoded segment may hold only the characters package names, versions, file names and
//! hash directories use (ASCII letters and digits, `-._~!+@`): no `/` (but the one in a
//! first-segment `@scope%2fname`), no `%` (double encoding), no `\`, `;`, `?`, `#`, dot
//! segments, empty segments or control characters. So every server, however it decodes,
//! normalises or cuts a path, reads the same segments the proxy judged; and the proxy
//! forwards [`Segments::encode`] of them, never the client's bytes.

/// Characters a decoded segment may hold besides ASCII letters and digits.
const SEGMENT_EXTRA: &[u8] = b"-._~!+@";

/// The decoded segments of a path, and whether it ended in `/` (an index page's spelling).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Segments {
    /// The decoded segments, none empty.
    pub segs: Vec<String>,
    /// Whether the path ended in `/` after its last segment (always true for the root).
    pub trailing_slash: bool,
}

impl Segments {
    /// Splits and decodes an absolute path; `None` for anything outside the rules above.
    /// `scoped_first`: the first segment may be `@scope%2fname` (npm), whose decoded `/` is
    /// the one `/` a segment may hold.
    pub fn parse(path: &str, scoped_first: bool) -> Option<Self> {
        let rest = path.strip_prefix('/')?;
        if rest.is_empty() {
            return Some(Self {
                segs: Vec::new(),
                trailing_slash: true,
            });
        }
        let (rest, trailing_slash) = match rest.strip_suffix('/') {
            Some(r) => (r, true),
            None => (rest, false),
        };
        let segs = rest
            .split('/')
            .enumerate()
            .map(|(i, raw)| segment(raw, scoped_first && i == 0))
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            segs,
            trailing_slash,
        })
    }

    /// The segments as `&str`, for matching on their shape.
    pub fn as_strs(&self) -> Vec<&str> {
        self.segs.iter().map(String::as_str).collect()
    }

    /// The one spelling the origin is sent: each segment percent-encoded except for ASCII
    /// letters, digits, `-._~` and `@` (so `+` goes as `%2B`, which no server reads as a
    /// space, and a scope's `/` as npm's own `%2f`), joined by `/`, with the trailing `/` if
    /// the judged path had one. Parsing it again gives the same segments.
    pub fn encode(&self) -> String {
        let mut out = String::from("/");
        for (i, seg) in self.segs.iter().enumerate() {
            if i > 0 {
                out.push('/');
            }
            for b in seg.bytes() {
                match b {
                    b'/' => out.push_str("%2f"),
                    b if b.is_ascii_alphanumeric() || b"-._~@".contains(&b) => {
                        out.push(char::from(b));
                    }
                    b => out.push_str(&format!("%{b:02X}")),
                }
            }
        }
        if self.trailing_slash && !self.segs.is_empty() {
            out.push('/');
        }
        out
    }
}

/// One raw segment decoded, or `None` when it breaks the rules (see the module's doc).
fn segment(raw: &str, scoped: bool) -> Option<String> {
    let seg = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .ok()?
        .into_owned();
    let plain = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || SEGMENT_EXTRA.contains(&b))
    };
    let ok = match seg.split_once('/') {
        None => plain(&seg),
        // `@scope/name`: exactly one `/`, both sides plain, the scope marked.
        Some((scope, name)) => {
            scoped && scope.len() > 1 && scope.starts_with('@') && plain(scope) && plain(name)
        }
    };
    ok.then_some(seg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(path: &str, scoped: bool) -> Option<Vec<String>> {
        Segments::parse(path, scoped).map(|s| s.segs)
    }

    #[test]
    fn segments_are_decoded_and_odd_paths_refused() {
        assert_eq!(segs("/", false), Some(vec![]));
        assert_eq!(
            segs("/simple/numpy/", false),
            Some(vec!["simple".into(), "numpy".into()])
        );
        assert_eq!(
            segs("/@scope%2fname", true),
            Some(vec!["@scope/name".into()])
        );
        assert_eq!(
            segs("/@scope%2Fname", true),
            Some(vec!["@scope/name".into()])
        );
        for odd in [
            "",
            "simple/",
            "/simple//numpy/",
            "//simple/numpy/",
            "/simple/numpy//",
            "/simple/../victim/",
            "/simple/%2e%2e/victim/",
            "/simple/%2E%2E/victim/",
            "/simple/./numpy/",
            "/simple/a%5cb/",
            "/simple/a\\b/",
            "/simple/%ff/",
            "/simple/a%0ab/",
            "/simple/a;b/",
            "/simple/a%3bb/",
            "/simple/a%3Fb/",
            "/simple/a%23b/",
            "/simple/a%252fb/",
            "/simple/a%2fb/",
            "/simple/a b/",
            "/simple/caf%C3%A9/",
            // A scope's `/` only in the first segment, only once, only after `@scope`.
            "/@a%2fb%2fc",
            "/x/@a%2fb",
            "/a%2fb",
            "/@%2fb",
            "/@a%2f",
            "/@a%2f..",
        ] {
            assert_eq!(segs(odd, true), None, "{odd:?}");
        }
        assert_eq!(segs("/@scope%2fname", false), None, "no scope on PyPI");
    }

    #[test]
    fn the_forwarded_spelling_parses_to_the_same_segments() {
        for (path, encoded) in [
            ("/", "/"),
            ("/simple/NumPy/", "/simple/NumPy/"),
            ("/simple/Num%50y/", "/simple/NumPy/"),
            ("/lod%61sh", "/lodash"),
            ("/@types%2Fnode", "/@types%2fnode"),
            ("/%40types/node", "/@types/node"),
            (
                "/packages/torch-2.0%2bcpu-cp311-none-any.whl",
                "/packages/torch-2.0%2Bcpu-cp311-none-any.whl",
            ),
            (
                "/packages/torch-2.0+cpu-cp311-none-any.whl",
                "/packages/torch-2.0%2Bcpu-cp311-none-any.whl",
            ),
            ("/packages/a-1!2.0.tar.gz", "/packages/a-1%212.0.tar.gz"),
            ("/left~pad", "/left~pad"),
        ] {
            let s = Segments::parse(path, true).unwrap_or_else(|| unreachable!("{path}"));
            assert_eq!(s.encode(), encoded, "{path:?}");
            assert_eq!(Segments::parse(&s.encode(), true), Some(s), "{path:?}");
        }
    }
}
