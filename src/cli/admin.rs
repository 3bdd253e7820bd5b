//! `egressgate admin`: which pre-approved list or token operation, and the database it acts on.

use clap::Subcommand;

use crate::config::RawConfig;

/// `admin sites|packages`.
#[derive(Subcommand, Debug)]
pub enum AdminListCmd {
    /// Pre-approved site patterns (`host` or `*.suffix`).
    Sites {
        /// Operation.
        #[command(subcommand)]
        op: AdminOp,
    },
    /// Pre-approved packages (`name`, `pip:name`, `npm:name`).
    Packages {
        /// Operation.
        #[command(subcommand)]
        op: AdminOp,
    },
    /// Named API tokens with scopes (`turns`, `approvals`, `cards:read`, `chats`, `admin`).
    Tokens {
        /// Operation.
        #[command(subcommand)]
        op: TokenOp,
    },
}

/// `admin tokens add|list|remove`.
#[derive(Subcommand, Debug)]
pub enum TokenOp {
    /// Add a token; its secret is printed once on stdout (only its SHA-256 is kept).
    Add {
        /// The token's name.
        name: String,
        /// A scope it holds (repeatable).
        #[arg(long = "scope", required = true)]
        scopes: Vec<String>,
        /// Lifetime (`30d`, `12h`); without it the token does not expire.
        #[arg(long)]
        ttl: Option<String>,
        /// Database settings.
        #[command(flatten)]
        db: RawConfig,
    },
    /// List tokens (names, scopes, expiry; never secrets).
    List {
        /// Database settings.
        #[command(flatten)]
        db: RawConfig,
    },
    /// Remove a token; it stops working on the next request.
    Remove {
        /// The token's name.
        name: String,
        /// Database settings.
        #[command(flatten)]
        db: RawConfig,
    },
}

/// `add|list|remove`.
#[derive(Subcommand, Debug)]
pub enum AdminOp {
    /// Add an entry.
    Add {
        /// The pattern or package name.
        value: String,
        /// Why it is pre-approved.
        #[arg(long)]
        note: Option<String>,
        /// Database settings.
        #[command(flatten)]
        db: RawConfig,
    },
    /// List entries.
    List {
        /// Database settings.
        #[command(flatten)]
        db: RawConfig,
    },
    /// Remove an entry.
    Remove {
        /// The pattern or package name.
        value: String,
        /// Database settings.
        #[command(flatten)]
        db: RawConfig,
    },
}
