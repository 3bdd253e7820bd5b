//! Finds one member of a zip archive held in memory through its central directory, without
//! building an index: the end-of-central-directory record gives the entry count, which is
//! checked against a bound before anything else is read, and the directory is then walked
//! record by record (each checked to lie inside the archive) for the first name that
//! matches. So a crafted wheel with a million tiny entries costs a refusal, not a million
//! allocations; the member's bytes are then read from its local header by the `zip` crate.

/// Most central-directory entries a wheel may have for its dependencies to be read (real
/// wheels have a few thousand at most; `zip` would allocate an index entry for each). Below
/// 65 535, so the classic end record always holds the count: a ZIP64 one means "too many".
pub const ENTRIES_MAX: usize = 50_000;

/// The end-of-central-directory record's signature and fixed size.
const EOCD_SIG: u32 = 0x0605_4b50;
const EOCD_LEN: usize = 22;

/// A central-directory file header's signature and fixed size.
const CDFH_SIG: u32 = 0x0201_4b50;
const CDFH_LEN: usize = 46;

/// Where a member's local header starts, and its compressed size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    /// Offset of its local file header in the archive.
    pub local_offset: usize,
    /// Its compressed size (the local header may leave it to a data descriptor).
    pub compressed_size: u64,
}

/// Why a member could not be found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// No end record, or one or a directory record pointing outside the archive.
    Malformed,
    /// More entries than [`ENTRIES_MAX`] (or a ZIP64 end record, which only such need).
    TooManyEntries,
    /// No entry's name matched.
    NotFound,
}

/// The first member whose name `wanted` accepts, after the entry count passed the bound.
pub fn find(zip: &[u8], wanted: impl Fn(&str) -> bool) -> Result<Member, Refused> {
    let (entries, cd_offset, cd_size) = end_record(zip)?;
    if entries > ENTRIES_MAX {
        return Err(Refused::TooManyEntries);
    }
    let cd = zip
        .get(cd_offset..cd_offset.checked_add(cd_size).ok_or(Refused::Malformed)?)
        .ok_or(Refused::Malformed)?;
    let mut at = 0;
    for _ in 0..entries {
        let head = cd.get(at..at + CDFH_LEN).ok_or(Refused::Malformed)?;
        if u32_at(head, 0) != CDFH_SIG {
            return Err(Refused::Malformed);
        }
        let name_len = usize::from(u16_at(head, 28));
        let rest = usize::from(u16_at(head, 30)) + usize::from(u16_at(head, 32));
        let name = cd
            .get(at + CDFH_LEN..at + CDFH_LEN + name_len)
            .ok_or(Refused::Malformed)?;
        if std::str::from_utf8(name).is_ok_and(&wanted) {
            return Ok(Member {
                local_offset: usize::try_from(u32_at(head, 42)).map_err(|_| Refused::Malformed)?,
                compressed_size: u64::from(u32_at(head, 20)),
            });
        }
        at += CDFH_LEN + name_len + rest;
    }
    Err(Refused::NotFound)
}

/// (entries, directory offset, directory size) from the end record, which must end the
/// archive exactly (with its comment): a signature inside a comment is not taken for one.
fn end_record(zip: &[u8]) -> Result<(usize, usize, usize), Refused> {
    let earliest = zip.len().saturating_sub(EOCD_LEN + usize::from(u16::MAX));
    let start = (earliest..=zip.len().saturating_sub(EOCD_LEN))
        .rev()
        .find(|&i| {
            let rec = &zip[i..];
            rec.len() >= EOCD_LEN
                && u32_at(rec, 0) == EOCD_SIG
                && EOCD_LEN + usize::from(u16_at(rec, 20)) == rec.len()
        })
        .ok_or(Refused::Malformed)?;
    let rec = &zip[start..];
    let (entries, size, offset) = (u16_at(rec, 10), u32_at(rec, 12), u32_at(rec, 16));
    if entries == u16::MAX || size == u32::MAX || offset == u32::MAX {
        return Err(Refused::TooManyEntries);
    }
    let wide = |v: u32| usize::try_from(v).map_err(|_| Refused::Malformed);
    Ok((usize::from(entries), wide(offset)?, wide(size)?))
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    /// A zip of `n` empty stored members `f0`…, then `last` holding `body`.
    fn zip_of(n: usize, last: &str, body: &[u8]) -> Vec<u8> {
        let mut buf = std::io::Cursor::new(Vec::new());
        {
            let mut z = zip::ZipWriter::new(&mut buf);
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Stored);
            for i in 0..n {
                assert!(z.start_file(format!("f{i}"), opts).is_ok());
            }
            assert!(z.start_file(last, opts).is_ok() && z.write_all(body).is_ok());
            assert!(z.finish().is_ok());
        }
        buf.into_inner()
    }

    #[test]
    fn finds_a_member_and_bounds_the_entry_count() {
        let z = zip_of(3, "a-1.0.dist-info/METADATA", b"Name: a\n");
        let m = find(&z, |n| n.ends_with("/METADATA"));
        assert_eq!(m.map(|m| m.compressed_size), Ok(8));
        assert_eq!(find(&z, |n| n == "nope"), Err(Refused::NotFound));
        let big = zip_of(ENTRIES_MAX, "x", b"");
        assert_eq!(find(&big, |_| false), Err(Refused::TooManyEntries));
        let ok = zip_of(ENTRIES_MAX - 1, "x", b"");
        assert_eq!(find(&ok, |_| false), Err(Refused::NotFound));
    }

    #[test]
    fn malformed_archives_are_refused_not_read_out_of_bounds() {
        let z = zip_of(2, "m", b"body");
        for cut in [0, 1, EOCD_LEN - 1, z.len() / 2, z.len() - 1] {
            assert!(find(&z[..cut], |_| true).is_err(), "cut at {cut}");
        }
        // The end record claims more entries than the directory holds.
        let mut lying = z.clone();
        let at = lying.len() - EOCD_LEN + 10;
        lying[at] = 200;
        assert_eq!(find(&lying, |_| false), Err(Refused::Malformed));
        // A directory offset past the end.
        let mut far = z.clone();
        let at = far.len() - EOCD_LEN + 16;
        far[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(find(&far, |_| true), Err(Refused::TooManyEntries));
        let mut far = z;
        let at = far.len() - EOCD_LEN + 16;
        far[at..at + 4].copy_from_slice(&0x00ff_0000u32.to_le_bytes());
        assert_eq!(find(&far, |_| true), Err(Refused::Malformed));
        assert_eq!(find(b"", |_| true), Err(Refused::Malformed));
    }
}
