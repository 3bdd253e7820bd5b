//! The dependencies a wheel declares: its `*.dist-info/METADATA` (found through the zip
//! central directory by [`central`], whose entry count is bounded before it is walked, and
//! read with a size cap) parsed as mail headers for `Requires-Dist`. Used when an index
//! publishes no PEP 658 metadata, so a refused wheel's dependencies can go on the same card
//! as the wheel. Nothing here allocates per archive entry: a read holds the wheel and at most
//! [`METADATA_MAX`] more.

pub mod central;

use std::io::Read as _;

use egressgate_store::Package;

/// Largest wheel the proxy reads for its dependencies (the whole file is held in memory).
pub const WHEEL_MAX: usize = 64 * 1024 * 1024;

/// Largest `METADATA` read (real ones are a few KiB; a bomb is cut, then fails closed).
pub const METADATA_MAX: u64 = 1024 * 1024;

/// Most dependencies taken from one wheel.
const DEPS_MAX: usize = 50;

/// The packages a wheel requires unconditionally or under environment markers (a dependency
/// behind an `extra` is left out: an installer only asks for it when asked to). Empty when
/// the bytes are not a wheel, have more than [`central::ENTRIES_MAX`] entries, or carry no
/// readable `METADATA`.
pub fn requires(wheel: &[u8]) -> Vec<Package> {
    let Ok(member) = central::find(wheel, is_metadata) else {
        return Vec::new();
    };
    let Some(mut local) = wheel.get(member.local_offset..) else {
        return Vec::new();
    };
    let Ok(Some(file)) = zip::read::read_zipfile_from_stream_with_compressed_size(
        &mut local,
        member.compressed_size,
    ) else {
        return Vec::new();
    };
    // The local header names the member the directory pointed at, or nothing is read.
    if !file.name().is_ok_and(|n| is_metadata(&n)) {
        return Vec::new();
    }
    let mut text = String::new();
    if file.take(METADATA_MAX).read_to_string(&mut text).is_err() {
        return Vec::new();
    }
    requires_dist(&text)
}

/// `NAME-VER.dist-info/METADATA` at the top level of the archive.
fn is_metadata(name: &str) -> bool {
    name.strip_suffix("/METADATA")
        .is_some_and(|dir| dir.ends_with(".dist-info") && !dir.contains('/'))
}

/// The `Requires-Dist` headers of core metadata (the header block ends at the first blank
/// line; the description may follow), folded continuation lines included.
pub fn requires_dist(metadata: &str) -> Vec<Package> {
    let mut out: Vec<Package> = Vec::new();
    let mut headers: Vec<String> = Vec::new();
    for line in metadata.lines() {
        if line.trim().is_empty() {
            break;
        }
        match (line.starts_with([' ', '\t']), headers.last_mut()) {
            (true, Some(last)) => last.push_str(line.trim()),
            _ => headers.push(line.to_owned()),
        }
    }
    for h in headers {
        let Some((key, value)) = h.split_once(':') else {
            continue;
        };
        if !key.trim().eq_ignore_ascii_case("requires-dist") {
            continue;
        }
        let (req, marker) = value.split_once(';').unwrap_or((value, ""));
        if marker.contains("extra") {
            continue;
        }
        let name: String = req
            .trim()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .collect();
        if let Ok(p) = Package::parse(&format!("pip:{name}"))
            && !out.contains(&p)
            && out.len() < DEPS_MAX
        {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn names(v: Vec<Package>) -> Vec<String> {
        v.into_iter().map(|p| p.as_str().to_owned()).collect()
    }

    #[test]
    fn requires_dist_headers() {
        let meta = "Metadata-Version: 2.1\nName: a\nVersion: 1.0\nRequires-Dist: Dep_One (>=1.0)\n\
                    Requires-Dist: dep-two>=2; python_version >= \"3.8\"\n\
                    Requires-Dist: optional; extra == \"dev\"\nrequires-dist: dep-one\n\n\
                    Requires-Dist: in-description\n";
        assert_eq!(names(requires_dist(meta)), ["dep-one", "dep-two"]);
        assert!(requires_dist("garbage").is_empty());
    }

    #[test]
    fn reads_metadata_from_a_wheel() {
        let mut buf = std::io::Cursor::new(Vec::new());
        {
            let mut z = zip::ZipWriter::new(&mut buf);
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated);
            let ok = z.start_file("a/__init__.py", opts).is_ok()
                && z.write_all(b"").is_ok()
                && z.start_file("a-1.0.dist-info/METADATA", opts).is_ok()
                && z.write_all(b"Name: a\nRequires-Dist: b\n").is_ok()
                && z.finish().is_ok();
            assert!(ok);
        }
        assert_eq!(names(requires(buf.get_ref())), ["b"]);
        assert!(requires(b"not a zip").is_empty());
        // Cut off where it ends: no end record, nothing read.
        assert!(requires(&buf.get_ref()[..buf.get_ref().len() - 1]).is_empty());
    }
}
