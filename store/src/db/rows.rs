//! Reading result rows into the store's types: each table family's reader says once, beside
//! its type, how columns become fields, and every list statement reads through one function.

use sqlx::AnyPool;

use super::StoreError;

/// A type read from one result row, column by column in its statement's order. Each table
/// family's reader says once, beside its type, how columns become fields; every statement
/// returning such rows reads them through [`fetch_all`].
pub(crate) trait FromRow: Sized {
    /// Reads one row (a column that cannot be read back is [`StoreError::Corrupt`]).
    fn from_row(r: &sqlx::any::AnyRow) -> Result<Self, StoreError>;
}

/// Runs `query` on the pool and reads every row it returns as `T`.
pub(crate) async fn fetch_all<T: FromRow>(
    pool: &AnyPool,
    query: sqlx::query::Query<'_, sqlx::Any, sqlx::any::AnyArguments>,
) -> Result<Vec<T>, StoreError> {
    query
        .fetch_all(pool)
        .await?
        .iter()
        .map(T::from_row)
        .collect()
}
