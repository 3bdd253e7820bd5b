//! The bulk workloads: whole large downloads through a tunnel (or straight from the origin),
//! one stream or several in parallel, each checked for its full length.

use std::io;
use std::time::{Duration, Instant};

use super::conn::{get_request, open};
use super::load::{Kind, Load, Target};
use super::meas::{Meas, measured};

/// `streams` parallel downloads of `mib` MiB each through a tunnel (or straight to the
/// origin), all within `limit`.
pub async fn bulk(t: &Target, load: &Load, streams: usize, mib: u64, limit: Duration) -> Meas {
    measured(t, |_| {
        (0..streams)
            .map(|_| tokio::spawn(download(t.clone(), load.clone(), mib, limit)))
            .collect()
    })
    .await
}

/// One download of `mib` MiB, counted as one answer.
async fn download(t: Target, load: Load, mib: u64, limit: Duration) -> Meas {
    let mut m = Meas::default();
    let r = tokio::time::timeout(limit, async {
        let t0 = Instant::now();
        let mut c = open(&t, Kind::TunKeep, &load).await?;
        m.conns += 1;
        let req = get_request(&t, Kind::TunKeep, &load, &format!("/bulk?mib={mib}"), true);
        let (head, n) = c.exchange(&req).await?;
        Ok::<_, io::Error>((head.status, n, t0.elapsed()))
    })
    .await;
    match r {
        Ok(Ok((status, n, took))) => {
            m.bytes += n;
            m.lat_us
                .push(u32::try_from(took.as_micros()).unwrap_or(u32::MAX));
            if status == 200 && n == mib << 20 {
                m.ok += 1;
            } else {
                m.bad_status += 1;
                m.problem(format!(
                    "status {status}, {n} bytes (expected 200, {} bytes)",
                    mib << 20
                ));
            }
        }
        Ok(Err(e)) => {
            m.errors += 1;
            m.problem(e.to_string());
        }
        Err(_) => {
            m.errors += 1;
            m.problem(format!("download not finished within {limit:?}"));
        }
    }
    m
}
