//! What a turn may reach: the proxy's allow check (one indexed query) and the effective
//! policy the package installer reads.

use sqlx::Row as _;
use sqlx::any::AnyRow;

use super::{Store, StoreError, placeholders};
use crate::access::Access;
use crate::grant::Grant;
use crate::host::Host;
use crate::ids::{ChatId, UserId};
use crate::package::{Package, PackageSpec};
use crate::pattern::SitePattern;
use crate::time::Timestamp;

/// The kind of an approval row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalKind {
    /// A site (host pattern).
    Site,
    /// A package.
    Package,
}

impl ApprovalKind {
    /// Stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Site => "site",
            Self::Package => "package",
        }
    }

    /// Parses the stored (and URL) spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "site" => Some(Self::Site),
            "package" => Some(Self::Package),
            _ => None,
        }
    }
}

/// One unexpired approval row of a chat.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ApprovalRow {
    /// Site or package.
    pub kind: ApprovalKind,
    /// The host pattern or package name.
    pub value: String,
    /// The card (interrupt id) that created it.
    pub card_id: String,
    /// When it stops counting.
    pub expires_at: Timestamp,
    /// How much of the host a site row opens (`full` for packages).
    pub access: Access,
}

impl Store {
    /// The grant that allows `host` for this chat: the administrators' list, or an unexpired
    /// approval row (the longest-lived when several match). Launch-time sites live on the
    /// turn and are checked by the caller in memory. One query, matching exact and
    /// `*.parent` keys through the primary-key indexes.
    pub async fn site_allowed(
        &self,
        user: &UserId,
        chat: &ChatId,
        host: &Host,
        now: Timestamp,
    ) -> Result<Option<Grant>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        site_allowed_on(&mut conn, user, chat, host, now).await
    }

    /// A chat's unexpired approvals, sites first.
    pub async fn chat_approvals(
        &self,
        user: &UserId,
        chat: &ChatId,
        now: Timestamp,
    ) -> Result<Vec<ApprovalRow>, StoreError> {
        let query = sqlx::query(
            "SELECT kind, value, card_id, expires_at, access FROM approvals \
             WHERE user_id = $1 AND chat_id = $2 AND expires_at > $3 ORDER BY kind DESC, value",
        )
        .bind(user.as_str())
        .bind(chat.as_str())
        .bind(now.millis());
        super::fetch_all(self.pool(), query).await
    }
}

/// [`Store::site_allowed`] on a given connection (or inside a transaction).
pub(crate) async fn site_allowed_on(
    conn: &mut sqlx::AnyConnection,
    user: &UserId,
    chat: &ChatId,
    host: &Host,
    now: Timestamp,
) -> Result<Option<Grant>, StoreError> {
    let keys = SitePattern::candidate_keys(host);
    let list = placeholders(4, keys.len());
    let sql = format!(
        "SELECT 'admin', '', CAST(0 AS BIGINT), access, inspect FROM admin_sites \
         WHERE pattern IN ({list}) \
         UNION ALL SELECT 'approval', card_id, expires_at, access, CAST(0 AS BIGINT) FROM approvals \
         WHERE user_id = $1 AND chat_id = $2 AND kind = 'site' AND expires_at > $3 \
         AND value IN ({list})"
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(user.as_str())
        .bind(chat.as_str())
        .bind(now.millis());
    for k in &keys {
        q = q.bind(k.as_str());
    }
    let mut best: Option<Grant> = None;
    for row in q.fetch_all(&mut *conn).await? {
        let grant = match row.try_get::<String, _>(0)?.as_str() {
            "admin" => Grant::admin(),
            _ => Grant::approval(row.try_get(1)?, Timestamp::from_millis(row.try_get(2)?)),
        };
        let access =
            Access::parse(&row.try_get::<String, _>(3)?).ok_or(StoreError::Corrupt("access"))?;
        let grant = Grant {
            inspect: row.try_get::<i64, _>(4)? != 0,
            ..grant.with_access(access)
        };
        best = Some(match best {
            Some(b) => b.outlasting(grant),
            None => grant,
        });
    }
    Ok(best)
}

/// SQL that is true when column `col` holds `package`, unpinned or pinned (its canonical
/// [`PackageSpec`] text), with the package's name bound as `param`. The name is ASCII (both
/// ecosystems' rules), so its length in bytes is its length in characters; a pin starts right
/// after the name with a character no name of the ecosystem holds: `@` for npm (whose names
/// may hold `~`, so `npm:left~pad` is another package than `npm:left`), one of `=<>!~` for
/// PyPI (whose canonical names are letters, digits and `-`).
pub(crate) fn names_package(col: &str, package: &Package, param: &str) -> String {
    let n = package.as_str().len();
    let starts = if package.as_str().starts_with("npm:") {
        "'@'"
    } else {
        "'=', '<', '>', '!', '~'"
    };
    format!(
        "({col} = {param} OR (substr({col}, 1, {n}) = {param} AND \
         substr({col}, {m}, 1) IN ({starts})))",
        m = n + 1
    )
}

/// The grant that allows `version` of `package` for this chat (`None` version: metadata about
/// the package, allowed by any grant of it): the administrators' list or an unexpired package
/// approval, whose pin, if any, admits the version (the longest-lived when several do).
/// Stored grants are the canonical text of a [`PackageSpec`]: the name, or the name followed
/// at once by its pin (`numpy==2.1.*`, `npm:lodash@^4`), so one query finds both by prefix.
pub(crate) async fn package_allowed_on(
    conn: &mut sqlx::AnyConnection,
    user: &UserId,
    chat: &ChatId,
    package: &Package,
    version: Option<&str>,
    now: Timestamp,
) -> Result<Option<Grant>, StoreError> {
    let prefixed = |col: &str| names_package(col, package, "$4");
    let sql = format!(
        "SELECT 'admin', name, '', CAST(0 AS BIGINT) FROM admin_packages WHERE {} \
         UNION ALL SELECT 'approval', value, card_id, expires_at FROM approvals WHERE user_id = $1 \
         AND chat_id = $2 AND kind = 'package' AND expires_at > $3 AND {}",
        prefixed("name"),
        prefixed("value")
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(user.as_str())
        .bind(chat.as_str())
        .bind(now.millis())
        .bind(package.as_str())
        .fetch_all(&mut *conn)
        .await?;
    let mut best: Option<Grant> = None;
    for row in rows {
        let text: String = row.try_get(1)?;
        // A row this crate did not write in this shape admits nothing (fail closed).
        let Ok(spec) = PackageSpec::parse(&text) else {
            continue;
        };
        if spec.package() != package || !spec.admits(version) {
            continue;
        }
        let grant = match row.try_get::<String, _>(0)?.as_str() {
            "admin" => Grant::admin(),
            _ => Grant::approval(row.try_get(2)?, Timestamp::from_millis(row.try_get(3)?)),
        };
        best = Some(match best {
            Some(b) => b.outlasting(grant),
            None => grant,
        });
    }
    Ok(best)
}

impl super::FromRow for ApprovalRow {
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Self {
            kind: ApprovalKind::parse(&r.try_get::<String, _>(0)?)
                .ok_or(StoreError::Corrupt("approvals.kind"))?,
            value: r.try_get(1)?,
            card_id: r.try_get(2)?,
            expires_at: Timestamp::from_millis(r.try_get(3)?),
            access: Access::parse(&r.try_get::<String, _>(4)?)
                .ok_or(StoreError::Corrupt("approvals.access"))?,
        })
    }
}
