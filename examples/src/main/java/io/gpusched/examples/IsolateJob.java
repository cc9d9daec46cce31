package io.gpusched.examples;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.isolation.CgroupDeviceIsolator;
import io.gpusched.isolation.Fence;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Fences a child process to one GPU with a cgroup (needs root and cgroups): the child lists which /dev/nvidia* nodes
 * of this host it may open. Without them it says why and stops.
 */
public final class IsolateJob {
    private IsolateJob() {
    }

    /** @param args ignored */
    public static void main(String[] args) throws Exception {
        try (GpuInventory node = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = GpuScheduler.builder().inventory(node).auditLogging(false).build()) {
            CgroupDeviceIsolator iso = CgroupDeviceIsolator.detect(node.devices());
            if (!iso.isAvailable()) {
                System.out.println("isolation unavailable here: " + iso.unavailabilityCause().get());
                return;
            }
            Allocation a = s.allocate(GpuRequest.builder().deviceIndices(1).build());
            Path cg = Files.createDirectory(iso.v2Root().or(iso::v1Root).get().resolve("gpusched-example-" + a.id()));
            try (Fence f = iso.fence(cg, a)) {
                System.out.println("fenced " + cg + " (" + f.mechanism() + "): " + f.rules());
                Process p = new ProcessBuilder("sh", "-c", "echo $$ > \"$0/cgroup.procs\"; for f in /dev/nvidia*;"
                        + " do if err=$(dd if=$f of=/dev/null count=0 2>&1); then echo \"$f opens\"; else"
                        + " echo \"$f: ${err##*: }\"; fi; done", cg.toString()).inheritIO().start();
                System.out.println("(Operation not permitted: fenced off; No such device or address: allowed, but"
                        + " no driver answers on this host)");
                p.waitFor();
            } finally {
                Files.deleteIfExists(cg);
                s.release(a.id());
            }
        }
    }
}
