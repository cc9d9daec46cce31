package io.gpusched.slurm;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.rocm.KfdSysfsInventory;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.time.Clock;
import java.util.ArrayList;
import java.util.List;

/** The nodes golden files exist for: every built-in simulated profile, and the MIG and AMD captures (see INDEX). */
final class TestNodes {
    static final String MIG = "h100-mig";
    static final String AMD = "mi300x-cpx-2x4";

    private TestNodes() {
    }

    static List<String> names() {
        List<String> out = new ArrayList<>(NodeDescriptions.PROFILES);
        out.add(MIG);
        out.add(AMD);
        return out;
    }

    static Path captures() {
        try {
            return Path.of(TestNodes.class.getResource("/captures/INDEX").toURI()).getParent();
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    static GpuInventory open(String name) {
        return switch (name) {
            case MIG -> GpuInventories.simulated(captures().resolve("h100-mig.yaml").toString());
            case AMD -> KfdSysfsInventory.open(captures().resolve("kfd-mi300x-cpx-2x4"), Clock.systemUTC());
            default -> GpuInventories.simulated(name);
        };
    }

    /** The /proc of a node's vendor: dynamic majors and MIG cap minors. */
    static Path proc(GpuInventory inv) {
        boolean amd = inv.devices().stream().anyMatch(d -> d.vendor() == io.gpusched.core.GpuVendor.AMD);
        return captures().resolve(amd ? "proc-amd" : "proc-nvidia");
    }
}
