package io.gpusched.cuda;

import io.gpusched.core.internal.StrictYaml;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;

/**
 * Minimum driver per CUDA toolkit release and the minor-version-compatibility floor per major release, as data
 * ({@code io/gpusched/cuda/driver-table.yaml}); {@link #parse(String, String)} reads an extended table.
 */
public final class CompatibilityTable {

    private final Map<CudaVersion, DriverVersion> toolkits;
    private final Map<Integer, DriverVersion> floors;
    private final Map<Integer, DriverVersion> forwardFloors;

    private CompatibilityTable(Map<CudaVersion, DriverVersion> toolkits, Map<Integer, DriverVersion> floors,
            Map<Integer, DriverVersion> forwardFloors) {
        this.toolkits = toolkits;
        this.floors = floors;
        this.forwardFloors = forwardFloors;
    }

    /** @return the table shipped with gpusched */
    public static CompatibilityTable builtIn() {
        String resource = "/io/gpusched/cuda/driver-table.yaml";
        try (InputStream in = CompatibilityTable.class.getResourceAsStream(resource)) {
            return parse(new String(in.readAllBytes(), StandardCharsets.UTF_8), resource);
        } catch (IOException e) {
            throw new IllegalStateException("cannot read " + resource, e);
        }
    }

    /** @throws io.gpusched.core.GpuConfigException naming the bad row */
    public static CompatibilityTable parse(String yaml, String source) {
        StrictYaml root = StrictYaml.parse(yaml, source).onlyKeys(Set.of("minor_version_floor", "forward_compat_floor",
                "toolkits"));
        Map<CudaVersion, DriverVersion> toolkits = new TreeMap<>();
        StrictYaml t = root.child("toolkits");
        for (String k : t.keys()) {
            toolkits.put(t.parsed(k, x -> CudaVersion.parse(k), null).majorMinor(),
                    t.parsed(k, DriverVersion::parse, null));
        }
        return new CompatibilityTable(toolkits, byMajor(root.child("minor_version_floor")),
                byMajor(root.child("forward_compat_floor")));
    }

    private static Map<Integer, DriverVersion> byMajor(StrictYaml f) {
        Map<Integer, DriverVersion> out = new TreeMap<>();
        for (String k : f.keys()) {
            if (!k.matches("[0-9]{1,3}")) {
                throw f.error(f.pathOf(k), "keys are CUDA major versions such as \"12\"");
            }
            out.put(Integer.parseInt(k), f.parsed(k, DriverVersion::parse, null));
        }
        return out;
    }

    /** @return the oldest driver a major release's forward-compatibility package supports; empty: none claimed */
    public Optional<DriverVersion> forwardCompatFloor(int major) {
        return Optional.ofNullable(forwardFloors.get(major));
    }

    /** @return the minimum driver that runs this toolkit's major.minor natively, if the table has the release */
    public Optional<DriverVersion> minimumDriver(CudaVersion toolkit) {
        return Optional.ofNullable(toolkits.get(toolkit.majorMinor()));
    }

    /** @return the floor for minor version compatibility of a major release (11 and later) */
    public Optional<DriverVersion> minorVersionFloor(int major) {
        return Optional.ofNullable(floors.get(major));
    }

    /** @return the oldest toolkit release in the table, if any */
    public Optional<CudaVersion> oldestToolkit() {
        return toolkits.keySet().stream().findFirst();
    }

    /** @return the newest toolkit release in the table, if any */
    public Optional<CudaVersion> newestToolkit() {
        return toolkits.keySet().stream().reduce((a, b) -> b);
    }

    /** @return the newest toolkit release this driver runs natively, by the table */
    public Optional<CudaVersion> newestNativeToolkit(DriverVersion driver) {
        CudaVersion best = null;
        for (Map.Entry<CudaVersion, DriverVersion> e : toolkits.entrySet()) {
            if (driver.atLeast(e.getValue())) {
                best = e.getKey();
            }
        }
        return Optional.ofNullable(best);
    }
}
