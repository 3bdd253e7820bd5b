//! The proxy's own read of a refused wheel (for its dependencies) is bounded in memory: a
//! wheel's central-directory entries are counted before anything is indexed and a wheel with
//! more than the bound is not read further, the parse runs on a blocking thread, and at most
//! two wheels of at most 64 MiB are held at once. The figure is measured on the real binary:
//! its peak resident memory (`VmHWM`) while eight reads of the largest wheels it accepts run
//! at once, printed by `cargo test --test packages_wheel_reads -- --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;

use support::registry::file_mirror::{FileMirror, file_mirror};
use support::registry::{self, refused_packages};
use support::{Gate, Turn, proxy_get};

const INDEX: &str = "pypi.test";

/// The largest wheel the proxy reads (`WHEEL_MAX`).
const WHEEL_MAX: usize = 64 * 1024 * 1024;

/// The most central-directory entries it reads a wheel with (`ENTRIES_MAX`).
const ENTRIES_MAX: usize = 50_000;

/// What the gate's resident memory may grow by while the reads run: two wheels of
/// [`WHEEL_MAX`] (the reads at once) and 32 MiB for everything else.
const GROWTH_MAX: usize = 2 * WHEEL_MAX + 32 * 1024 * 1024;

/// CRC-32 (IEEE), as zip records it.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// A stored (uncompressed) zip of `members` (name, body), with a ZIP64 end record when the
/// count does not fit the classic one.
fn zip(members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let (mut out, mut dir) = (Vec::new(), Vec::new());
    for (name, body) in members {
        let offset = out.len() as u32;
        let fixed = |sig: u32| {
            let mut h = sig.to_le_bytes().to_vec();
            h.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // version, flags, stored, time, date
            h.extend_from_slice(&crc32(body).to_le_bytes());
            h.extend_from_slice(&(body.len() as u32).to_le_bytes());
            h.extend_from_slice(&(body.len() as u32).to_le_bytes());
            h.extend_from_slice(&(name.len() as u16).to_le_bytes());
            h.extend_from_slice(&[0, 0]); // extra
            h
        };
        out.extend(fixed(0x0403_4b50));
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(body);
        let mut c = 0x0201_4b50u32.to_le_bytes().to_vec();
        c.extend_from_slice(&[20, 0]); // made by
        c.extend(fixed(0).split_off(4));
        c.extend_from_slice(&[0; 10]); // comment, disk, attributes
        c.extend_from_slice(&offset.to_le_bytes());
        c.extend_from_slice(name.as_bytes());
        dir.extend(c);
    }
    let (cd_offset, cd_size, n) = (out.len() as u64, dir.len() as u64, members.len() as u64);
    out.extend(dir);
    let wide = n > 0xFFFE;
    if wide {
        let at = out.len() as u64;
        out.extend_from_slice(&0x0606_4b50u32.to_le_bytes());
        out.extend_from_slice(&44u64.to_le_bytes());
        out.extend_from_slice(&[45, 0, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        for v in [n, n, cd_size, cd_offset] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&0x0706_4b50u32.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
    }
    let short = if wide { 0xFFFF } else { n as u16 };
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&short.to_le_bytes());
    out.extend_from_slice(&short.to_le_bytes());
    out.extend_from_slice(&(cd_size as u32).to_le_bytes());
    out.extend_from_slice(&(cd_offset as u32).to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

/// A wheel of `name` 1.0 requiring `dep`, with `filler` empty members, padded by one more
/// member to `size` bytes when given.
fn wheel(dir: &Path, name: &str, dep: &str, filler: usize, size: Option<usize>) {
    let meta = format!("Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\nRequires-Dist: {dep}\n");
    let mut members: Vec<(String, Vec<u8>)> = (0..filler)
        .map(|i| (format!("{i:x}"), Vec::new()))
        .collect();
    members.push((format!("{name}-1.0.dist-info/METADATA"), meta.into_bytes()));
    if let Some(size) = size {
        members.push(("pad".into(), Vec::new()));
        let short = size - zip(&members).len();
        members.last_mut().unwrap().1 = vec![0x5a; short];
    }
    let bytes = zip(&members);
    assert!(bytes.len() <= WHEEL_MAX, "{name}: {} bytes", bytes.len());
    let path = dir.join(format!("packages/{name}-1.0-py3-none-any.whl"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn setup(dir: &Path) -> (FileMirror, Gate) {
    let m = file_mirror(dir);
    let g = registry::mirror_gate("pypi", INDEX, m.port).start();
    (m, g)
}

async fn refused_wheel(g: &Gate, m: &FileMirror, turn: &Turn, name: &str) {
    let url = format!(
        "http://{INDEX}:{}/packages/{name}-1.0-py3-none-any.whl",
        m.port
    );
    let r = proxy_get(g.proxy(), turn, &url).await;
    assert_eq!(r.status, 403, "{name}: {}", r.text());
}

/// A `kB` figure of `/proc/PID/status`, in bytes.
fn status_bytes(pid: u32, key: &str) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(key)).unwrap();
    let kb: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wheel_with_more_entries_than_the_bound_is_not_indexed() {
    let dir = tempfile::tempdir().unwrap();
    wheel(dir.path(), "crowded", "crowded-dep", ENTRIES_MAX, None);
    wheel(dir.path(), "roomy", "roomy-dep", ENTRIES_MAX - 1, None);
    let (m, g) = setup(dir.path());
    let turn = g.api().turn("u", "c", &[]).await;
    refused_wheel(&g, &m, &turn, "crowded").await;
    refused_wheel(&g, &m, &turn, "roomy").await;
    // The wheel at the bound is read for its dependency; the one past it is not.
    assert_eq!(
        refused_packages(&g.api(), &turn).await,
        ["crowded", "roomy", "roomy-dep"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn eight_reads_of_the_largest_wheels_stay_within_two_wheels_of_memory() {
    let dir = tempfile::tempdir().unwrap();
    // The largest wheel read through: 64 MiB and as many entries as allowed.
    wheel(
        dir.path(),
        "largest",
        "largest-dep",
        ENTRIES_MAX - 2,
        Some(WHEEL_MAX),
    );
    // 64 MiB of empty entries: what an index of every entry would cost.
    let crowd = (WHEEL_MAX - 4096) / (30 + 46 + 2 * 5);
    wheel(dir.path(), "crowd", "crowd-dep", crowd, None);
    let (m, g) = setup(dir.path());
    let mut turns = Vec::new();
    for i in 0..4 {
        turns.push(g.api().turn("u", &format!("c{i}"), &[]).await);
    }
    let before = status_bytes(g.pid(), "VmRSS:");
    let reads = turns.iter().flat_map(|t| {
        ["largest", "crowd"]
            .into_iter()
            .map(|w| refused_wheel(&g, &m, t, w))
    });
    futures_util::future::join_all(reads).await;
    let peak = status_bytes(g.pid(), "VmHWM:");
    let mib = |b: usize| b as f64 / 1048576.0;
    eprintln!(
        "egressgate resident memory: {:.1} MiB before, {:.1} MiB peak during 8 wheel reads \
         (growth {:.1} MiB, bound {:.1} MiB)",
        mib(before),
        mib(peak),
        mib(peak - before),
        mib(GROWTH_MAX)
    );
    assert!(
        peak - before <= GROWTH_MAX,
        "peak {:.1} MiB grew {:.1} MiB",
        mib(peak),
        mib(peak - before)
    );
    // The largest wheels were read (their dependency is on each record); the crowded ones
    // were refused before an index was built.
    for t in &turns {
        assert_eq!(
            refused_packages(&g.api(), t).await,
            ["crowd", "largest", "largest-dep"]
        );
    }
}
