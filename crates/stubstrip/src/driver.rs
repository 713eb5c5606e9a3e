//! The one place that knows which libraries come with the GPU driver, and where the driver lives.
//!
//! These libraries exist only on the machine that runs a program: the CUDA toolkit ships link-time
//! stubs for some of them, and a build sandbox has none of them. `audit` does not report them as
//! missing, and `explain` names them when it finds a stub in their place.

/// SONAMEs of the NVIDIA driver's user-space libraries that programs link against or `dlopen`.
///
/// Taken from the driver's own file list (the `.so.N` names its libraries carry as `DT_SONAME`);
/// libraries whose SONAME carries the driver version (`libnvidia-glcore.so.550.54.14`, ...) are
/// never named by programs and are left out.
pub const DRIVER_LIBRARIES: &[&str] = &[
    "libcuda.so.1",
    "libcudadebugger.so.1",
    "libnvidia-ml.so.1",
    "libnvidia-ptxjitcompiler.so.1",
    "libnvidia-nvvm.so.4",
    "libnvidia-opencl.so.1",
    "libnvcuvid.so.1",
    "libnvidia-encode.so.1",
    "libnvidia-opticalflow.so.1",
    "libnvidia-fbc.so.1",
    "libnvidia-cfg.so.1",
    "libnvidia-allocator.so.1",
    "libnvoptix.so.1",
    "libEGL_nvidia.so.0",
    "libGLX_nvidia.so.0",
    "libGLESv2_nvidia.so.2",
    "libGLESv1_CM_nvidia.so.1",
    "libvdpau_nvidia.so.1",
];

/// Directories that hold the driver only on the machine that runs the program (NixOS's driver
/// link, 64- and 32-bit): their absence at build time is expected.
pub const RUNTIME_DIRS: &[&str] = &["/run/opengl-driver/lib", "/run/opengl-driver-32/lib"];

/// Whether `name` (a `DT_NEEDED` entry or a SONAME) is one of [`DRIVER_LIBRARIES`].
pub fn is_driver_library(name: &[u8]) -> bool {
    DRIVER_LIBRARIES.iter().any(|d| d.as_bytes() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_libraries_are_sonames() {
        for d in DRIVER_LIBRARIES {
            assert!(d.starts_with("lib") && d.contains(".so."), "{d}");
        }
        assert!(is_driver_library(b"libcuda.so.1"));
        assert!(!is_driver_library(b"libcuda.so"));
        assert!(!is_driver_library(b"libcudart.so.12"));
    }
}
