//! What a turn may reach: the proxy's allow check (one indexed query) and the effective
//! policy the package installer reads.

use sqlx::Row as _;
use sqlx::any::AnyRow;

use super::{Store, StoreError, json_column, placeholders};
use crate::access::Access;
use crate::grant::{CountedRow, Grant, Scope};
use crate::host::Host;
use crate::ids::{ChatId, TurnId, UserId};
use crate::package::{Package, PackageSpec};
use crate::path_prefix::PathPrefix;
use crate::pattern::SitePattern;
use crate::spelling::spelling;
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

spelling!(ApprovalKind {
    Site => "site",
    Package => "package",
});

/// One unexpired approval row of a chat or of a user.
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
    /// How far it reaches: the card's turn, its chat, or every chat of the user.
    pub scope: Scope,
    /// Connections it still admits (`null`: unlimited; `0`: spent, listed until it expires).
    pub uses_left: Option<i64>,
    /// The path prefixes it is narrowed to (`null`: the whole host).
    pub paths: Option<Vec<PathPrefix>>,
    /// The turn a `turn`-scope row belongs to (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}

impl ApprovalRow {
    /// Whether it opens its whole value for as long as it lives: unlimited, not narrowed to
    /// paths (and, for a site, `full`). A narrower row still leaves a card something to ask.
    pub fn is_whole(&self) -> bool {
        self.uses_left.is_none() && self.paths.is_none() && self.access == Access::Full
    }

    /// Whether it can admit anything now (a spent row admits nothing).
    pub fn admits(&self) -> bool {
        self.uses_left.is_none_or(|n| n > 0)
    }
}

/// The columns [`ApprovalRow`] reads, in its order.
const ROW_COLUMNS: &str =
    "kind, value, card_id, expires_at, access, scope, uses_left, paths, turn_id";

/// SQL true for the approval rows that apply to a turn (`$1` user, `$2` chat, `$3` turn):
/// its chat's rows, its own turn rows and its user's user-scope rows (stored with chat `''`).
const APPLIES_TO_TURN: &str = "user_id = $1 AND chat_id IN ($2, '') AND turn_id IN ('', $3)";

/// SQL true for the rows stored under one chat column (`$2`; `''`: the user-scope rows), of
/// every turn when `$3` is `''`.
const OF_CHAT_COLUMN: &str = "user_id = $1 AND chat_id = $2 AND ($3 = '' OR turn_id = $3)";

impl Store {
    /// The grant that allows `host` for this turn: the administrators' list, or an unexpired
    /// approval row that applies to it and has uses left (the widest, then the longest-lived,
    /// when several match). Launch-time sites live on the turn and are checked by the caller
    /// in memory. One query, matching exact and `*.parent` keys through the primary-key
    /// indexes.
    pub async fn site_allowed(
        &self,
        at: ApprovalsOf<'_>,
        host: &Host,
        now: Timestamp,
    ) -> Result<Option<Grant>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        site_allowed_on(&mut conn, at, host, now).await
    }

    /// A chat's unexpired approvals (its chat rows and its turns' rows; spent ones too),
    /// sites first.
    pub async fn chat_approvals(
        &self,
        user: &UserId,
        chat: &ChatId,
        now: Timestamp,
    ) -> Result<Vec<ApprovalRow>, StoreError> {
        self.approval_rows(OF_CHAT_COLUMN, user, chat.as_str(), "", now)
            .await
    }

    /// A user's unexpired user-scope approvals (they apply to every chat), sites first.
    pub async fn user_approvals(
        &self,
        user: &UserId,
        now: Timestamp,
    ) -> Result<Vec<ApprovalRow>, StoreError> {
        self.approval_rows(OF_CHAT_COLUMN, user, "", "", now).await
    }

    /// Every unexpired approval that applies to a turn (its chat's, its own and its user's),
    /// sites first: what the approval tool and the policy endpoint count as granted.
    pub async fn turn_approvals(
        &self,
        at: ApprovalsOf<'_>,
        now: Timestamp,
    ) -> Result<Vec<ApprovalRow>, StoreError> {
        self.approval_rows(
            APPLIES_TO_TURN,
            at.user,
            at.chat.as_str(),
            at.turn.as_str(),
            now,
        )
        .await
    }

    /// Approval rows matching `cond` over `$1` user, `$2` chat and `$3` turn, unexpired at
    /// `$4`.
    async fn approval_rows(
        &self,
        cond: &str,
        user: &UserId,
        chat: &str,
        turn: &str,
        now: Timestamp,
    ) -> Result<Vec<ApprovalRow>, StoreError> {
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM approvals WHERE {cond} AND expires_at > $4 \
             ORDER BY kind DESC, value, scope"
        );
        let query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(user.as_str())
            .bind(chat)
            .bind(turn)
            .bind(now.millis());
        super::fetch_all(self.pool(), query).await
    }
}

/// Whose approvals count: a turn's (its user's user-scope rows, its chat's rows and its own
/// turn rows).
#[derive(Debug, Clone, Copy)]
pub struct ApprovalsOf<'a> {
    /// The turn's user.
    pub user: &'a UserId,
    /// The turn's chat.
    pub chat: &'a ChatId,
    /// The turn.
    pub turn: &'a TurnId,
}

/// [`Store::site_allowed`] on a given connection (or inside a transaction).
pub(crate) async fn site_allowed_on(
    conn: &mut sqlx::AnyConnection,
    at: ApprovalsOf<'_>,
    host: &Host,
    now: Timestamp,
) -> Result<Option<Grant>, StoreError> {
    let keys = SitePattern::candidate_keys(host);
    let list = placeholders(5, keys.len());
    let sql = format!(
        "SELECT 'admin', '', CAST(0 AS BIGINT), access, inspect, CAST(NULL AS BIGINT), \
         CAST(NULL AS TEXT), '', '', pattern FROM admin_sites WHERE pattern IN ({list}) \
         UNION ALL SELECT 'approval', card_id, expires_at, access, CAST(0 AS BIGINT), uses_left, \
         paths, chat_id, turn_id, value FROM approvals WHERE {APPLIES_TO_TURN} AND kind = 'site' \
         AND expires_at > $4 AND (uses_left IS NULL OR uses_left > 0) AND value IN ({list})"
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(at.user.as_str())
        .bind(at.chat.as_str())
        .bind(at.turn.as_str())
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
        let access = crate::db::word_column(&row, 3, Access::parse, "access")?;
        let counted = match row.try_get::<Option<i64>, _>(5)? {
            Some(uses_left) => Some(std::sync::Arc::new(CountedRow {
                user_id: at.user.as_str().to_owned(),
                chat_id: row.try_get(7)?,
                turn_id: row.try_get(8)?,
                value: row.try_get(9)?,
                uses_left,
            })),
            None => None,
        };
        let grant = Grant {
            inspect: row.try_get::<i64, _>(4)? != 0,
            paths: paths_column(row.try_get(6)?)?.map(Into::into),
            counted,
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
    at: ApprovalsOf<'_>,
    package: &Package,
    version: Option<&str>,
    now: Timestamp,
) -> Result<Option<Grant>, StoreError> {
    let prefixed = |col: &str| names_package(col, package, "$5");
    let sql = format!(
        "SELECT 'admin', name, '', CAST(0 AS BIGINT) FROM admin_packages WHERE {} \
         UNION ALL SELECT 'approval', value, card_id, expires_at FROM approvals WHERE \
         {APPLIES_TO_TURN} AND kind = 'package' AND expires_at > $4 AND {}",
        prefixed("name"),
        prefixed("value")
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(at.user.as_str())
        .bind(at.chat.as_str())
        .bind(at.turn.as_str())
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
            kind: crate::db::word_column(r, 0, ApprovalKind::parse, "approvals.kind")?,
            value: r.try_get(1)?,
            card_id: r.try_get(2)?,
            expires_at: Timestamp::from_millis(r.try_get(3)?),
            access: crate::db::word_column(r, 4, Access::parse, "approvals.access")?,
            scope: crate::db::word_column(r, 5, Scope::parse, "approvals.scope")?,
            uses_left: r.try_get(6)?,
            paths: paths_column(r.try_get(7)?)?,
            turn_id: Some(r.try_get::<String, _>(8)?).filter(|t| !t.is_empty()),
        })
    }
}

/// The `paths` column: `NULL` is the whole host; a list that does not parse, or names a
/// prefix that is not in normal form, is a corrupt row (never read as the whole host).
fn paths_column(text: Option<String>) -> Result<Option<Vec<PathPrefix>>, StoreError> {
    let Some(text) = text else { return Ok(None) };
    let raw: Vec<String> = json_column(&text, "approvals.paths")?;
    raw.iter()
        .map(|p| PathPrefix::parse(p).map_err(|_| StoreError::Corrupt("approvals.paths")))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}
