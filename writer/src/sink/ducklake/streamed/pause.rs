//! After a streamed flush the files could not take (a table or flush shape
//! only DuckDB's insert writes), streamed flushes are held and inserted
//! for a while.
use std::time::{Duration, Instant};

/// How long streamed flushes are held after one the files could not take.
const FILES_PAUSE: Duration = Duration::from_secs(600);

#[derive(Default)]
pub struct FilesPause {
    /// Until when streamed flushes are held.
    until: Option<Instant>,
}

impl FilesPause {
    pub fn turn_files_off(&mut self, why: &str) {
        tracing::warn!(why = %why, minutes = FILES_PAUSE.as_secs() / 60,
            "streamed flushes are held and inserted by DuckDB for a while");
        self.until = Some(Instant::now() + FILES_PAUSE);
    }

    /// Whether a stream may begin now; said once when the pause ends.
    pub fn files_on(&mut self) -> bool {
        match self.until {
            Some(until) if Instant::now() < until => false,
            Some(_) => {
                tracing::info!("writing large streamed flushes to files again");
                self.until = None;
                true
            }
            None => true,
        }
    }
}
