//! Entry points for the fuzz targets in `fuzz/` to the decoders that are not
//! otherwise public: what the helper reads back from the shell an action ran
//! in. Not a stable API.

use crate::store::SessionState;

/// G's report line (`exit N`, `signal N`): whether it parses.
pub fn parse_status(line: &str) -> bool {
    crate::sandbox::helper::session::parse_status(line).is_some()
}

/// The `cwd\0` + `declare -px` dump an action's shell leaves behind,
/// relative to the fixed environment `fixed`.
pub fn parse_session(data: &[u8], fixed: &[(String, String)]) -> Option<SessionState> {
    crate::sandbox::helper::session::parse_session(data, fixed)
}

/// The `declare -px` lines alone.
pub fn parse_declarations(text: &[u8]) -> Vec<(String, Vec<u8>)> {
    crate::sandbox::declare::parse_declarations(text)
}
