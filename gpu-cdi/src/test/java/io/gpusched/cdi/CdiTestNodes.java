package io.gpusched.cdi;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.rocm.KfdSysfsInventory;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.ArrayList;
import java.util.List;

/**
 * The nodes of the golden files: every built-in simulated profile, and the MIG and AMD captures, read from
 * gpu-slurm's test fixtures ({@code ../gpu-slurm/src/test/resources/captures}, see its INDEX).
 */
final class CdiTestNodes {
    static final String MIG = "h100-mig";
    static final String AMD = "mi300x-cpx-2x4";

    private CdiTestNodes() {
    }

    static List<String> names() {
        List<String> out = new ArrayList<>(NodeDescriptions.PROFILES);
        out.add(MIG);
        out.add(AMD);
        return out;
    }

    static Path captures() {
        return Path.of("../gpu-slurm/src/test/resources/captures").toAbsolutePath().normalize();
    }

    static GpuInventory open(String name) {
        return switch (name) {
            case MIG -> GpuInventories.simulated(captures().resolve("h100-mig.yaml").toString());
            case AMD -> KfdSysfsInventory.open(captures().resolve("kfd-mi300x-cpx-2x4"), Clock.systemUTC());
            default -> GpuInventories.simulated(name);
        };
    }

    static Path proc(GpuInventory inv) {
        boolean amd = inv.devices().stream().anyMatch(d -> d.vendor() == GpuVendor.AMD);
        return captures().resolve(amd ? "proc-amd" : "proc-nvidia");
    }

    /** A /dev with the optional NVIDIA control nodes present (plain files: only their existence is read). */
    static Path dev(Path dir) throws IOException {
        Path dev = Files.createDirectories(dir.resolve("dev"));
        for (String n : List.of("nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")) {
            Files.writeString(dev.resolve(n), "");
        }
        return dev;
    }
}
