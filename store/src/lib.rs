//! egressgate's shared core: the words of the domain (hosts, patterns, packages, ids, secrets,
//! refusal reasons, time) and the database that both planes meet in. Keeping the normaliser
//! and every SQL statement here means the proxy and the approval card can never disagree on
//! what a host is.

mod spelling;

pub mod access;
pub mod blob;
pub mod ca;
pub mod card;
pub mod credential;
pub mod db;
pub mod grant;
pub mod host;
pub mod ids;
pub mod metric_registry;
pub mod mode;
pub mod package;
pub mod path_prefix;
pub mod pattern;
pub mod reason;
pub mod time;
pub mod weburl;

pub use access::Access;
pub use card::Card;
pub use db::{Backend, PoolOptions, Store, StoreError};
pub use grant::{CountedRow, Grant, GrantKind, Scope};
pub use host::{Host, HostError};
pub use ids::{
    ChatId, DraftId, InboxLinkId, InterruptId, MessageId, Secret, SecretHash, TurnId, UserId,
    WebhookId,
};
pub use mode::Mode;
pub use package::{Package, PackageError, PackageSpec};
pub use path_prefix::PathPrefix;
pub use pattern::{PatternError, SitePattern, approvable_host, refusal_approvable};
pub use reason::RefusalReason;
pub use time::Timestamp;
pub use weburl::{SanitizedUrl, UrlError};
