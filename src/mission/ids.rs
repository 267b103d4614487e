//! The names a mission is made of: its id (a ref component and the name of its `fleet:` claim)
//! and its projects' names. Both are checked in `FromStr`, so bad input is a usage error before
//! any work, by the same rules as task ids (docs/storage.md, "Names").

use std::fmt;
use std::str::FromStr;

use crate::error::Refusal;
use crate::ids::check_component;

/// A mission's id, e.g. `v2-launch`: `refs/loop/missions/<id>` and claim `fleet:<id>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MissionId(String);

impl MissionId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for MissionId {
    type Err = Refusal;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        check_component("mission id", s)?;
        Ok(MissionId(s.to_owned()))
    }
}

impl fmt::Display for MissionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A project's name within its mission, e.g. `api`; it prefixes the project's output lines.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProjectName(String);

impl ProjectName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ProjectName {
    type Err = Refusal;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        check_component("project name", s)?;
        Ok(ProjectName(s.to_owned()))
    }
}

impl fmt::Display for ProjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_not_safe_ref_components_are_refused() {
        for bad in ["", "V2", "a/b", "a..b", "x.lock", "-a", ".a", "a b", "trailing.", &"a".repeat(65)] {
            assert!(bad.parse::<MissionId>().is_err(), "{bad:?} must be refused as a mission id");
            assert!(bad.parse::<ProjectName>().is_err(), "{bad:?} must be refused as a project name");
        }
        for good in ["v2-launch", "api", "m1", "web.app", "0"] {
            assert!(good.parse::<MissionId>().is_ok(), "{good:?} is a valid mission id");
        }
    }
}
