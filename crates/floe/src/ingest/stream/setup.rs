//! What an ingest starts from: the settings in effect, the positions it resumes from (its own
//! or its group's), and the in-process maintenance.

use std::path::Path;
use std::time::Duration;

use iceberg::table::Table;

use super::IngestBuilder;
use crate::base::error::{Error, Result};
use crate::base::properties::{
    duration_prop, u64_prop, INGEST_SOURCE_TIMEOUT, INGEST_WRITE_BUFFER_SIZE,
    INGEST_WRITE_BUFFER_SIZE_DEFAULT, WRITE_DISTRIBUTION_MODE,
};
use crate::catalog::ident_string;
use crate::ingest::debt::{maintain_enabled, DebtLimits};
use crate::ingest::group::Group;
use crate::ingest::hook::{AfterCommit, Start};
use crate::ingest::options::Distribution;
use crate::ingest::report::IngestPlan;
use crate::ingest::source::Positions;
use crate::table::exactly_once::writer_positions;

impl IngestBuilder {
    /// What [`IngestBuilder::execute`] would do, changing nothing and reading no record: the
    /// settings in effect (options, then table properties, then defaults) and the positions
    /// it would resume from. A stream has no cost known ahead, so the plan has none.
    pub async fn plan(&self) -> Result<IngestPlan> {
        self.options.validate()?;
        let table = self.catalog.load_table(&self.ident).await?;
        let (write_buffer_size, distribution) = self.settings(&table)?;
        let resume_from = writer_positions(&table, &self.options.writer_id);
        let props = table.metadata().properties();
        let maintain = maintain_enabled(self.options.maintain, props)?;
        let debt_limits =
            DebtLimits::from_properties(props, self.options.commit_interval, maintain)?;
        Ok(IngestPlan {
            table: ident_string(&self.ident),
            writer_id: self.options.writer_id.clone(),
            source: self.source.uri(),
            resumes_after_snapshot: resume_from.as_ref().map(|(id, _)| *id),
            resume_from: resume_from.map(|(_, p)| p).unwrap_or_default(),
            write_buffer_size,
            distribution,
            write_parallelism: self.options.write_parallelism,
            commit_interval_ms: self.options.commit_interval.as_millis() as u64,
            commit_bytes: self.options.commit_bytes,
            commit_records: self.options.commit_records,
            maintain,
            debt_limits,
        })
    }

    /// The write buffer budget and distribution in effect for `table`, and a check of the
    /// writer id.
    pub(super) fn settings(&self, table: &Table) -> Result<(u64, Distribution)> {
        let props = table.metadata().properties();
        let budget = match self.options.write_buffer_size {
            Some(b) => b,
            None => u64_prop(
                props,
                INGEST_WRITE_BUFFER_SIZE.key,
                INGEST_WRITE_BUFFER_SIZE_DEFAULT,
            )
            .map_err(|e| e.for_table(&ident_string(table.identifier())))?,
        };
        let distribution = match self.options.distribution {
            Some(d) => d,
            None => match props.get(WRITE_DISTRIBUTION_MODE.key) {
                Some(v) => v.parse()?,
                None => Distribution::None,
            },
        };
        if self.options.writer_id.trim().is_empty() {
            return Err(Error::invalid_option(
                "--writer-id",
                "",
                "must not be empty",
            ));
        }
        Ok((budget, distribution))
    }

    /// `--source-timeout`, else `floe.ingest.source-timeout` of `table` (0: none).
    pub(super) fn source_timeout(&self, table: &Table) -> Result<Option<Duration>> {
        if let Some(d) = self.options.source_timeout {
            return Ok(Some(d));
        }
        let name = ident_string(&self.ident);
        let props = table.metadata().properties();
        Ok(
            match duration_prop(props, INGEST_SOURCE_TIMEOUT.key, 0, 1)
                .map_err(|e| e.for_table(&name))?
            {
                0 => None,
                ms => Some(Duration::from_millis(ms)),
            },
        )
    }

    /// Where the ingest resumes: its group's positions (joining it), or its own in `table`.
    pub(super) async fn resume(&mut self, table: &Table) -> Result<Positions> {
        Ok(match &self.options.group {
            Some(opts) => {
                let g = Group::join(
                    &self.catalog,
                    &self.ident,
                    &self.options.writer_id,
                    opts.clone(),
                )
                .await?;
                let p = g.resume_positions(&self.catalog, &self.ident).await?;
                self.group = Some(g);
                p
            }
            None => writer_positions(table, &self.options.writer_id)
                .map(|(_, p)| p)
                .unwrap_or_default(),
        })
    }

    /// Starts the table's maintenance in this process (`--maintain`), its store by default a
    /// SQLite file under `spill_root`.
    pub(super) async fn start_maintenance(
        &mut self,
        spill_root: &Path,
    ) -> Result<Box<dyn AfterCommit>> {
        let Some(maintenance) = self.maintenance.clone() else {
            return Err(Error::invalid_option(
                "--maintain",
                "true",
                "this ingest was built without a maintenance (IngestBuilder::with_maintenance)",
            ));
        };
        let store = match &self.options.maintain_store {
            Some(uri) => uri.clone(),
            None => format!(
                "sqlite://{}?mode=rwc",
                spill_root.join("maintain.db").display()
            ),
        };
        // Named after the writer id alone: a restarted ingest takes back the lease of the one it
        // replaces (a second process under the same id is refused at its first commit).
        let holder = format!("ingest {}", self.options.writer_id);
        let start = Start {
            store,
            holder,
            interval: self.options.maintain_interval,
        };
        let m = maintenance.start(&self.catalog, &self.ident, start).await?;
        self.metrics.attach_maintenance(m.metrics());
        Ok(m)
    }
}
