//! `import --wasm`: booting a guest into a session snapshot.

use std::path::Path;

use super::AnySnapshot;
use crate::Runtime;
use crate::runtime::{Result, RuntimeError};

/// What [`Runtime::import_session`] boots.
#[derive(Clone, Copy, Debug)]
pub struct SessionImport<'a> {
    /// `python` (the bundled guest) or the path of a `.wasm` guest module.
    pub guest: &'a str,
    /// A directory that becomes the session's initial `/workspace`.
    pub workspace: Option<&'a Path>,
    /// The guest's randomness seed, 64 hex digits (default: the boot spec's).
    pub seed: Option<&'a str>,
}

impl Runtime {
    /// Boot a WebAssembly guest (with `workspace` as its initial
    /// `/workspace`) and store the live session as a root snapshot.
    ///
    /// # Errors
    /// A seed that is not 64 hex digits, an unreadable guest, a guest that
    /// does not speak the guest protocol, or a build without the `wasm`
    /// feature ([`RuntimeError::WasmUnavailable`]).
    pub fn import_session(&self, spec: &SessionImport<'_>) -> Result<AnySnapshot> {
        if let Some(seed) = spec.seed
            && !(seed.len() == 64 && seed.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(RuntimeError::BadSeed(seed.to_owned()));
        }
        #[cfg(feature = "wasm")]
        {
            let (name, bytes) = if spec.guest == "python" {
                ("python".to_owned(), crate::wasm::python_guest()?)
            } else {
                let path = Path::new(spec.guest);
                let bytes = std::fs::read(path).map_err(|e| RuntimeError::Io {
                    op: "read the guest module (give `python` or a .wasm file)",
                    path: path.to_owned(),
                    source: e,
                })?;
                let stem = path
                    .file_stem()
                    .map_or_else(|| "guest".to_owned(), |s| s.to_string_lossy().into_owned());
                (stem, bytes)
            };
            let mut boot = crate::wasm::BootSpec::python();
            boot.args = vec![name];
            if let Some(seed) = spec.seed {
                boot.seed = seed.to_ascii_lowercase();
            }
            if let Some(dir) = spec.workspace {
                // The directory becomes the session's workspace layers; the
                // native snapshot that carried them is not kept in the index.
                let carrier = self.import(dir, None)?;
                boot.workspace_layers = carrier.manifest().layers.clone();
                self.store().unlist_snapshot(carrier.id())?;
            }
            let rt = self.wasm(crate::wasm::WasmLimits::default())?;
            Ok(AnySnapshot::Wasm(rt.import(&bytes, &boot)?))
        }
        #[cfg(not(feature = "wasm"))]
        Err(RuntimeError::WasmUnavailable)
    }
}
