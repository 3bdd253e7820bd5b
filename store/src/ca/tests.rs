//! The CA's life through both homes (the data directory's file and the database's sealed
//! row): made once, renewed before its end, a CA of an older release replaced, a constrained
//! CA widened when an administrator inspects one more name.

use std::time::Duration;

use super::*;
use crate::db::Store;
use crate::db::admin::{AdminList, SiteRules};
use crate::db::testing;

const DAY: i64 = 86_400_000;

fn p(s: &str) -> SitePattern {
    SitePattern::parse(s, &[]).unwrap_or_else(|e| unreachable!("{s}: {e}"))
}

fn days(n: u64) -> Duration {
    Duration::from_secs(n * 86_400)
}

/// `home` permitting only `files.example.com` besides the inspected entries.
fn constrained(home: &CaHome) -> CaHome {
    home.clone().with_policy(CaPolicy {
        names: Some(vec![p("files.example.com")]),
        ..CaPolicy::default()
    })
}

/// Runs `check` on a file home and on a database home over one fresh store, each starting
/// its CA's life at the same fixed instant (the third argument), so a row's times read as
/// offsets from it.
async fn each_home<F, Fut>(check: F) -> Result<(), CaError>
where
    F: Fn(CaHome, Store, Timestamp) -> Fut,
    Fut: std::future::Future<Output = Result<(), CaError>>,
{
    let dir = tempfile::tempdir().map_err(|e| CaError::File {
        path: "tempdir".into(),
        source: e,
    })?;
    let t0 = Timestamp::from_millis(1_700_000_000_000);
    let db = testing::fresh().await;
    check(
        CaHome::dir(dir.path().to_owned(), db.store.clone()),
        db.store.clone(),
        t0,
    )
    .await?;
    let db = testing::fresh().await;
    let seal = SealKey::repeated(7);
    check(
        CaHome::database(db.store.clone(), Some(seal)),
        db.store.clone(),
        t0,
    )
    .await
}

#[tokio::test]
async fn a_ca_is_renewed_before_it_ends_and_the_old_one_trusted_until_its_end()
-> Result<(), CaError> {
    each_home(|home, _, t0| async move {
        let home = home.with_policy(CaPolicy {
            lifetime: days(10),
            overlap: days(2),
            names: None,
        });
        let first = home.signing(t0).await?;
        assert_eq!(first.not_after().millis(), t0.millis() + 10 * DAY);
        let quiet = Timestamp::from_millis(t0.millis() + 7 * DAY);
        assert_eq!(home.signing(quiet).await?.cert_pem(), first.cert_pem());
        let late = Timestamp::from_millis(t0.millis() + 8 * DAY + 1000);
        let next = home.signing(late).await?;
        assert_ne!(
            next.cert_pem(),
            first.cert_pem(),
            "renewed within the overlap"
        );
        assert_eq!(next.not_after().millis(), late.millis() + 10 * DAY);
        assert_eq!(
            home.signing(late).await?.cert_pem(),
            next.cert_pem(),
            "once"
        );
        let trusted = home.trusted_pem(late).await?;
        assert!(trusted.starts_with(next.cert_pem()) && trusted.contains(first.cert_pem()));
        let ended = first.not_after();
        assert_eq!(
            home.trusted_pem(ended).await?,
            next.cert_pem(),
            "until its end"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_ca_that_outlives_the_lifetime_is_replaced_and_trusted_for_the_overlap_only()
-> Result<(), CaError> {
    each_home(|home, _, t0| async move {
        let ten_years = home.clone().with_policy(CaPolicy {
            lifetime: days(3650),
            ..CaPolicy::default()
        });
        let old = ten_years.signing(t0).await?;
        let new = home.signing(t0).await?;
        assert_ne!(new.cert_pem(), old.cert_pem());
        assert_eq!(new.not_after().millis(), t0.millis() + 365 * DAY);
        let in_overlap = Timestamp::from_millis(t0.millis() + 30 * DAY - 1);
        assert!(home.trusted_pem(in_overlap).await?.contains(old.cert_pem()));
        let after = Timestamp::from_millis(t0.millis() + 30 * DAY);
        assert_eq!(home.trusted_pem(after).await?, new.cert_pem());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_constrained_ca_is_widened_when_an_inspected_entry_is_added() -> Result<(), CaError> {
    each_home(|home, store, t0| async move {
        let constrained = constrained(&home);
        let first = constrained.signing(t0).await?;
        assert_eq!(first.names(), Some(&[p("files.example.com")][..]));
        let rules = SiteRules {
            inspect: true,
            ..SiteRules::default()
        };
        store
            .admin_add(AdminList::Sites, "*.example.org", None, rules, "t", t0)
            .await?;
        store
            .admin_add(
                AdminList::Sites,
                "plain.example.net",
                None,
                SiteRules::default(),
                "t",
                t0,
            )
            .await?;
        let wider = constrained.signing(t0).await?;
        assert_eq!(
            wider.names(),
            Some(&[p("files.example.com"), p("*.example.org")][..]),
            "the inspected entry, not the other"
        );
        assert_eq!(constrained.signing(t0).await?.cert_pem(), wider.cert_pem());
        let overlap_end = Timestamp::from_millis(t0.millis() + 30 * DAY);
        assert!(
            !home
                .trusted_pem(overlap_end)
                .await?
                .contains(first.cert_pem())
        );
        // An unconstrained process needs an unconstrained CA; a constrained one then accepts
        // it as it is (any name covers its names), so the two never replace each other back.
        let open = home.signing(t0).await?;
        assert_eq!(open.names(), None);
        assert_eq!(constrained.signing(t0).await?.cert_pem(), open.cert_pem());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn rotate_fits_the_names_and_reports_a_ca_made_where_there_was_none() -> Result<(), CaError> {
    each_home(|home, _, t0| async move {
        assert!(matches!(home.trusted_pem(t0).await, Err(CaError::Missing)));
        assert_eq!(home.rotate(t0, DAY).await?, None, "made, nothing replaced");
        let open = home.signing(t0).await?;
        let constrained = constrained(&home);
        let until = constrained.rotate(t0, DAY).await?;
        assert_eq!(until.map(Timestamp::millis), Some(t0.millis() + DAY));
        let fitted = constrained.signing(t0).await?;
        assert_ne!(fitted.cert_pem(), open.cert_pem());
        assert_eq!(fitted.names(), Some(&[p("files.example.com")][..]));
        Ok(())
    })
    .await
}
