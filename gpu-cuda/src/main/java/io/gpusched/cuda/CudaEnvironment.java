package io.gpusched.cuda;

import io.gpusched.core.internal.Json;
import java.nio.file.Path;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;

/**
 * What a job needs to see its GPUs and its CUDA: variables to set, directories to put first on path-like variables,
 * and read-only bind mounts for a job's mount namespace. A value; {@link #toJson()} prints it.
 *
 * @param variables     variables to set (they replace the job's own values)
 * @param pathPrepends  directories to put first on {@code PATH} / {@code LD_LIBRARY_PATH}, in order
 * @param mounts        read-only bind mounts
 * @param installation  the chosen installation, if any
 * @param compatibility its verdict against the driver
 * @param notes         things the host should know (no driver known, no installation, …)
 */
public record CudaEnvironment(Map<String, String> variables, Map<String, List<String>> pathPrepends,
        List<Mount> mounts, Optional<CudaInstallation> installation,
        Optional<Compatibility> compatibility, List<String> notes) {

    /** Variables that select devices: never taken from the job's own environment. */
    public static final List<String> DEVICE_SELECTORS = List.of("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
            "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL");

    /**
     * A bind mount.
     *
     * @param source   host path
     * @param target   path inside the job's namespace
     * @param readOnly whether it is read-only
     */
    public record Mount(Path source, Path target, boolean readOnly) {
    }

    /** Copies into sorted, immutable collections. */
    public CudaEnvironment {
        variables = Collections.unmodifiableMap(new TreeMap<>(variables));
        Map<String, List<String>> p = new TreeMap<>();
        pathPrepends.forEach((k, v) -> p.put(k, List.copyOf(v)));
        pathPrepends = Collections.unmodifiableMap(p);
        mounts = List.copyOf(mounts);
        Objects.requireNonNull(installation, "installation");
        Objects.requireNonNull(compatibility, "compatibility");
        notes = List.copyOf(notes);
    }

    /**
     * @param base the job's own environment
     * @return the environment to start the job with: the base without any device selector of its own, our variables
     *         set, and our directories put first on path-like variables
     */
    public Map<String, String> applyTo(Map<String, String> base) {
        Map<String, String> out = new LinkedHashMap<>(base);
        DEVICE_SELECTORS.forEach(out::remove);
        out.putAll(variables);
        pathPrepends.forEach((k, dirs) -> {
            String existing = out.get(k);
            String joined = String.join(":", dirs);
            out.put(k, existing == null || existing.isEmpty() ? joined : joined + ":" + existing);
        });
        return out;
    }

    /** @return this value as pretty JSON */
    public String toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("variables", variables);
        m.put("pathPrepends", pathPrepends);
        m.put("mounts", mounts.stream().map(x -> Map.of("source", x.source().toString(), "target",
                x.target().toString(), "readOnly", x.readOnly())).toList());
        installation.ifPresent(i -> {
            Map<String, Object> im = new LinkedHashMap<>();
            im.put("root", i.root().toString());
            im.put("aliases", i.aliases().stream().map(Path::toString).toList());
            im.put("version", i.version().map(Object::toString).orElse(null));
            im.put("versionSource", i.versionSource().map(Enum::name).orElse(null));
            im.put("runtimeApiVersion", i.runtimeApiVersion().map(Object::toString).orElse(null));
            m.put("installation", im);
        });
        compatibility.ifPresent(c -> m.put("compatibility", Map.of("verdict", c.verdict().name(),
                "message", c.message())));
        m.put("notes", notes);
        return Json.pretty(m);
    }
}
