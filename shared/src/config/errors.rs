use std::fmt;

/// One invalid or missing variable. The message never contains the value of
/// a secret variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub var: String,
    pub message: String,
}

/// Every configuration problem found at startup, reported together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    pub fn push(&mut self, var: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigError {
            var: var.into(),
            message: message.into(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn vars(&self) -> Vec<&str> {
        self.0.iter().map(|e| e.var.as_str()).collect()
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} configuration error(s):", self.0.len())?;
        for e in &self.0 {
            writeln!(f, "  {}: {}", e.var, e.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}
