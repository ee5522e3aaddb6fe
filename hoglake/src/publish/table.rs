//! Resolving the table before a publish: namespace and table created on
//! first use, new columns added and live ones promoted in batched alters,
//! the layout declared and checked, a recreated table noticed.
use arrow::datatypes::{Field, Schema};
use millpond_shared::deadline::Deadline;
use millpond_shared::retry::{Step, Stopped};

use super::{PublishError, Publisher, INSERTED_AT};
use crate::arrow_schema::column_defs;
use crate::catalog::{AlterOp, ErrorClass};
use crate::layout;
use crate::schema::{ColumnDef, ColumnType, Table};

impl Publisher {
    /// Namespace and table exist; the table has every column of `schema`
    /// the catalog accepts (plus `_inserted_at`), live int/float columns the
    /// batch carries as long/double are promoted, and the partition spec and
    /// sort order match the configured [`Layout`] (declared when missing,
    /// fatal when different). Returns the live table, read fresh. Columns
    /// the catalog refused are absent from it (counted in
    /// [`Self::schema_errors`]); the caller decides what becomes of their
    /// values.
    pub async fn bootstrap(&mut self, schema: &Schema) -> Result<Table, PublishError> {
        let name = self.table.clone();
        let table = self.resolve(&name, schema).await?;
        let payload_columns = schema.fields().iter().any(|f| f.name() != INSERTED_AT);
        let table = self.reconcile(table, payload_columns).await?;
        if !table.columns.iter().any(|c| c.name == INSERTED_AT) {
            return Err(PublishError::Schema(format!(
                "table {} has no `{INSERTED_AT}` column; it was not created by millpond, add `{INSERTED_AT} timestamptz` or point HOGLAKE_TABLE at another table",
                self.qualified()
            )));
        }
        if let Some(old) = &self.known_uuid {
            if *old != table.table_uuid {
                self.recreations += 1;
                tracing::warn!(table = %self.qualified(), old_uuid = %old, new_uuid = %table.table_uuid,
                    "hoglake table was dropped and recreated; publishing to the new incarnation under keys that name it");
            }
        }
        self.known_uuid = Some(table.table_uuid.clone());
        Ok(table)
    }

    /// [`Self::bootstrap`] with the write-path ladder for transient catalog
    /// errors (the writer resolves the table before converting values, out
    /// of [`Self::publish`]'s own retries), within `deadline`: every request
    /// is cut at it, and no wait ends past it.
    pub async fn bootstrap_retrying(
        &mut self,
        schema: &Schema,
        deadline: Deadline,
    ) -> Result<Table, PublishError> {
        let ladder = self.ladder.clone();
        let table = self.qualified();
        let mut state = (self, schema);
        let resolved = deadline
            .scope(ladder.retry_until(
                deadline,
                &mut state,
                |state, _| Box::pin(Self::bootstrap_once(state)),
                |_, attempt, pause, e| {
                    tracing::warn!(table = %table, attempt, error = %e,
                        pause_ms = pause.as_millis() as u64, "hoglake: resolving the table failed; retrying")
                },
            ))
            .await;
        resolved.map(|(t, _)| t).map_err(|stop| match stop {
            Stopped::Fatal { error, .. } | Stopped::Exhausted { error, .. } => error,
            Stopped::Deadline {
                error,
                attempts,
                pause,
            } => PublishError::DeadlineSpent {
                what: "resolving the table",
                table,
                attempts,
                deadline,
                pause,
                last: Box::new(error),
            },
        })
    }

    /// One attempt of [`Self::bootstrap_retrying`].
    async fn bootstrap_once(
        (publisher, schema): &mut (&mut Self, &Schema),
    ) -> Step<Table, PublishError> {
        match publisher.bootstrap(schema).await {
            Ok(t) => Step::Done(t),
            Err(e) if e.class() == ErrorClass::Permanent => Step::Fatal(e),
            Err(e) => Step::Retry {
                floor: e.retry_after(),
                error: e,
            },
        }
    }

    /// Table `name` of the namespace exists (created from `schema` plus
    /// `_inserted_at`), with every column of `schema` the catalog accepts,
    /// and with live int/float columns promoted where the batch is wider.
    pub(super) async fn resolve(
        &mut self,
        name: &str,
        schema: &Schema,
    ) -> Result<Table, PublishError> {
        let ns = self.namespace.clone();
        let batch_defs = batch_column_defs(schema)?;
        let table = match self.catalog.get_table(&ns, name).await? {
            Some(t) => t,
            None => {
                self.catalog.ensure_namespace(&ns).await?;
                let mut defs = batch_defs.clone();
                defs.push(inserted_at_def());
                let t = self.catalog.create_table(&ns, name, &defs).await?;
                tracing::info!(table = %format!("{ns}.{name}"), table_uuid = %t.table_uuid, columns = defs.len(), "hoglake table created");
                t
            }
        };
        let missing: Vec<AlterOp> = batch_defs
            .iter()
            .filter(|d| !table.columns.iter().any(|c| c.name == d.name))
            .map(|d| AlterOp::AddColumn { column: d.clone() })
            .collect();
        let (table, added) = self.evolve(name, table, missing, "adding columns").await?;
        self.columns_added += added;
        let promotions: Vec<AlterOp> = batch_defs
            .iter()
            .filter_map(|d| {
                let live = table.columns.iter().find(|c| c.name == d.name)?;
                promotion(live.column_type, d.column_type).map(|to| AlterOp::PromoteColumn {
                    name: d.name.clone(),
                    to,
                })
            })
            .collect();
        let (table, promoted) = self
            .evolve(name, table, promotions, "promoting columns")
            .await?;
        self.columns_promoted += promoted;
        Ok(table)
    }

    /// Applies schema `ops` to table `name` in ONE alter; when the catalog
    /// refuses the batch as a whole, one op at a time, so one bad column
    /// cannot block the others. An op still refused is left out (logged,
    /// counted in [`Self::schema_errors`]). Answers the table and how many
    /// ops applied.
    async fn evolve(
        &mut self,
        name: &str,
        table: Table,
        ops: Vec<AlterOp>,
        what: &str,
    ) -> Result<(Table, u64), PublishError> {
        if ops.is_empty() {
            return Ok((table, 0));
        }
        let ns = self.namespace.clone();
        let qualified = format!("{ns}.{name}");
        tracing::info!(table = %qualified, ops = ?ops, "hoglake: {what} in one alter");
        match self
            .catalog
            .alter_table(&ns, name, Some(&table.table_uuid), &ops)
            .await
        {
            Ok(t) => Ok((t, ops.len() as u64)),
            Err(e) if e.class() == ErrorClass::Permanent => {
                // Another writer may have made the same change since this
                // one read the table (two pods meeting one new key): read
                // it again and keep only the ops it still needs.
                let mut live = self.catalog.get_table(&ns, name).await?.ok_or(e)?;
                let ops: Vec<AlterOp> = ops.into_iter().filter(|op| !applied(&live, op)).collect();
                if ops.is_empty() {
                    tracing::info!(table = %qualified, "hoglake: another writer made these changes first; {what} not needed");
                    return Ok((live, 0));
                }
                tracing::warn!(table = %qualified, "hoglake: batched alter refused; {what} one at a time");
                let mut applied_here = 0;
                for op in ops {
                    match self
                        .catalog
                        .alter_table(&ns, name, Some(&live.table_uuid), std::slice::from_ref(&op))
                        .await
                    {
                        Ok(t) => {
                            live = t;
                            applied_here += 1;
                        }
                        Err(e) if e.class() == ErrorClass::Permanent => {
                            // The same race, one op later.
                            if let Some(fresh) = self.catalog.get_table(&ns, name).await? {
                                live = fresh;
                                if applied(&live, &op) {
                                    continue;
                                }
                            }
                            self.schema_errors += 1;
                            tracing::warn!(table = %qualified, op = ?op, error = %e,
                                "hoglake: schema change refused by the catalog; the column keeps its live shape");
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok((live, applied_here))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Declares a missing layout in one alter and verifies the answer; a
    /// live layout config does not describe is fatal.
    async fn reconcile(
        &mut self,
        table: Table,
        payload_columns: bool,
    ) -> Result<Table, PublishError> {
        let plan = layout::plan(&self.layout, &table, payload_columns)
            .map_err(|d| PublishError::Layout(d.0))?;
        for why in &plan.skipped {
            tracing::warn!(table = %self.qualified(), "hoglake: {why}");
        }
        if plan.ops.is_empty() {
            return Ok(table);
        }
        tracing::info!(table = %self.qualified(), partition_by = %layout::render(&self.layout.partition_by),
            sort_by = ?self.layout.sort_by, "hoglake: declaring the table layout");
        let altered = self
            .catalog
            .alter_table(
                &self.namespace,
                &self.table,
                Some(&table.table_uuid),
                &plan.ops,
            )
            .await?;
        let check = layout::plan(&self.layout, &altered, payload_columns)
            .map_err(|d| PublishError::Layout(d.0))?;
        if !check.ops.is_empty() {
            return Err(PublishError::Layout(format!(
                "declared the layout of {} but the catalog answered a table that still lacks it: {:?}",
                self.qualified(),
                check.ops
            )));
        }
        Ok(altered)
    }
}

/// Whether `table` already has what `op` would change: the column added
/// (with whatever type: values are converted to it), or promoted to at
/// least `to`.
fn applied(table: &Table, op: &AlterOp) -> bool {
    let live = |name: &str| table.columns.iter().find(|c| c.name == name);
    match op {
        AlterOp::AddColumn { column } => live(&column.name).is_some(),
        AlterOp::PromoteColumn { name, to } => live(name)
            .is_some_and(|c| c.column_type == *to || promotion(c.column_type, *to).is_none()),
        _ => false,
    }
}

fn inserted_at_def() -> ColumnDef {
    ColumnDef {
        name: INSERTED_AT.into(),
        column_type: ColumnType::Timestamptz,
        nullable: true,
        type_params: None,
        children: None,
        comment: None,
    }
}

/// The type a live column must be promoted to so a batch column of type
/// `batch` fits without loss (the widenings hoglake allows, 6.3); `None`
/// when no promotion applies.
pub fn promotion(live: ColumnType, batch: ColumnType) -> Option<ColumnType> {
    use ColumnType as T;
    match (live, batch) {
        (T::Int8 | T::Int16 | T::Int, T::Long) => Some(T::Long),
        (T::Int8, T::Int) => Some(T::Int),
        (T::Float, T::Double) => Some(T::Double),
        _ => None,
    }
}

/// Column definitions of the batch's columns (without `_inserted_at`, which
/// millpond owns).
fn batch_column_defs(schema: &Schema) -> Result<Vec<ColumnDef>, PublishError> {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .filter(|f| f.name() != INSERTED_AT)
        .map(|f| f.as_ref().clone())
        .collect();
    let mut defs = column_defs(&Schema::new(fields)).map_err(|e| {
        PublishError::Schema(format!("the batch has a column hoglake cannot store: {e}"))
    })?;
    // Columns are created nullable: a later flush may lack any of them.
    for d in &mut defs {
        d.nullable = true;
    }
    Ok(defs)
}
