package io.gpusched.cdi;

import io.gpusched.core.GpuException;
import io.gpusched.core.GpuVendor;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * How {@link CdiSpec} names and finds things.
 *
 * @param nvidiaKind   CDI kind of NVIDIA devices ({@code nvidia.com/gpu})
 * @param amdKind      CDI kind of AMD devices ({@code amd.com/gpu})
 * @param devRoot      where the host's device nodes are ({@code /dev}); a node at {@code devRoot/x} is {@code /dev/x}
 *                     in the container
 * @param procRoot     procfs root, for dynamic majors and MIG cap minors
 * @param libraryMounts read-only files or directories to mount at the same path (driver libraries)
 */
public record CdiOptions(String nvidiaKind, String amdKind, Path devRoot, Path procRoot, List<Path> libraryMounts) {
    /** CDI kind of NVIDIA GPUs by default, as {@code nvidia-ctk cdi generate} names it. */
    public static final String NVIDIA_KIND = "nvidia.com/gpu";
    /** CDI kind of AMD GPUs by default. */
    public static final String AMD_KIND = "amd.com/gpu";
    // vendor: a DNS name; class: no dots (a dot in the class needs cdiVersion 0.6.0, which podman 4.3 ignores)
    private static final Pattern KIND = Pattern.compile(
            "[a-z0-9]([a-z0-9-]*[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*/[a-zA-Z0-9]([a-zA-Z0-9_-]{0,61}[a-zA-Z"
                    + "0-9])?");

    /** @throws GpuException naming a kind that is not {@code vendor.tld/class} */
    public CdiOptions {
        checkKind(nvidiaKind);
        checkKind(amdKind);
        Objects.requireNonNull(devRoot, "devRoot");
        Objects.requireNonNull(procRoot, "procRoot");
        libraryMounts = List.copyOf(libraryMounts);
    }

    /** @return the defaults: the kinds above, {@code /dev}, {@code /proc}, no library mounts */
    public static CdiOptions defaults() {
        return new CdiOptions(NVIDIA_KIND, AMD_KIND, Path.of("/dev"), Path.of("/proc"), List.of());
    }

    /** @return a copy with another device root */
    public CdiOptions withDevRoot(Path v) {
        return new CdiOptions(nvidiaKind, amdKind, v, procRoot, libraryMounts);
    }

    /** @return a copy with another procfs root */
    public CdiOptions withProcRoot(Path v) {
        return new CdiOptions(nvidiaKind, amdKind, devRoot, v, libraryMounts);
    }

    /** @return a copy with these library mounts */
    public CdiOptions withLibraryMounts(List<Path> v) {
        return new CdiOptions(nvidiaKind, amdKind, devRoot, procRoot, v);
    }

    /** @return a copy with another NVIDIA kind */
    public CdiOptions withNvidiaKind(String v) {
        return new CdiOptions(v, amdKind, devRoot, procRoot, libraryMounts);
    }

    /** @return a copy with another AMD kind */
    public CdiOptions withAmdKind(String v) {
        return new CdiOptions(nvidiaKind, v, devRoot, procRoot, libraryMounts);
    }

    /** @return the kind of a vendor's devices */
    public String kind(GpuVendor vendor) {
        return vendor == GpuVendor.AMD ? amdKind : nvidiaKind;
    }

    private static void checkKind(String kind) {
        if (kind == null || !KIND.matcher(kind).matches()) {
            throw new GpuException("CDI kind \"" + kind + "\" is not vendor/class such as nvidia.com/gpu: the vendor a"
                    + " lower-case DNS name, the class letters, digits, - and _ (no dot: a dotted class needs"
                    + " cdiVersion 0.6.0, which podman 4.3 ignores)");
        }
    }
}
