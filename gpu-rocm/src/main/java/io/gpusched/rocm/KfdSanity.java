package io.gpusched.rocm;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * Checks the KFD tree that ROCm SMI will read before {@code rsmi_init} is called: librocm_smi 5.2.3 {@code assert()}s
 * and aborts the whole process on a malformed tree. An absent tree is fine (rsmi_init then fails cleanly with 8).
 */
final class KfdSanity {
    private KfdSanity() {
    }

    /** @return why the tree is unsafe for ROCm SMI, or empty when it is absent or sane */
    static Optional<String> problem(Path sysfsRoot) {
        Optional<KfdTopology> t = KfdTopology.read(sysfsRoot);
        if (t.isEmpty()) {
            return Optional.empty();
        }
        if (!t.get().problems().isEmpty()) {
            return Optional.of("the KFD topology at " + t.get().root() + " is malformed (" + t.get().problems().get(0)
                    + "); ROCm SMI 5.x would abort the process on it, so it is not called");
        }
        for (KfdTopology.Node n : t.get().nodes()) {
            if (n.gpuId().isEmpty() && Files.exists(t.get().root().resolve(String.valueOf(n.id())))) {
                return Optional.of("KFD node " + n.id() + " has no readable gpu_id; ROCm SMI 5.x would abort on it");
            }
            if (n.isGpu() && n.get("drm_render_minor").isEmpty()) {
                return Optional.of("KFD GPU node " + n.id() + " has no drm_render_minor; ROCm SMI 5.x would abort"
                        + " on it");
            }
        }
        return Optional.empty();
    }

    /** @return true when no trace of amdgpu is present: no module, no /dev/kfd, no DRM class */
    static boolean noDriverAtAll(Path sysfsRoot, Path devRoot) {
        return !Files.exists(sysfsRoot.resolve("module/amdgpu")) && !Files.exists(devRoot.resolve("kfd"))
                && !Files.exists(sysfsRoot.resolve("class/drm"));
    }

    /** @return a sentence on the amdgpu driver's state, for causes */
    static String driverState(Path sysfsRoot, Path devRoot) {
        Path init = sysfsRoot.resolve("module/amdgpu/initstate");
        try {
            if (!Files.exists(init)) {
                return "amdgpu is not loaded (" + init + " is absent)";
            }
            String s = Files.readString(init).trim();
            if (!s.equals("live")) {
                return "amdgpu initstate is \"" + s + "\", not \"live\"";
            }
        } catch (java.io.IOException e) {
            return "cannot read " + init;
        }
        return Files.exists(devRoot.resolve("kfd")) ? "amdgpu is live" : "amdgpu is live but " + devRoot.resolve("kfd")
                + " is absent";
    }
}
