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
import java.util.ArrayList;
import java.util.List;

/**
 * Fences a child process to GPU 1 with a cgroup (needs root and cgroups): the child tries to open /dev/null, each
 * /dev/nvidia* node of this host and the device nodes named as arguments, and says which it may open; its output
 * comes through this process's standard output. Without root or cgroups it says why and stops.
 */
public final class IsolateJob {
    private IsolateJob() {
    }

    /** @param args more device nodes for the child to try (e.g. nodes made with mknod for GPUs 0 and 1) */
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
                List<String> argv = new ArrayList<>(List.of("sh", "-c",
                        "echo $$ > \"$0/cgroup.procs\" || exit 9; shift;"
                                + " for f in /dev/null /dev/nvidia* \"$@\"; do [ -e \"$f\" ] || continue;"
                                + " if err=$(dd if=$f of=/dev/null count=0 2>&1); then echo \"$f opens\"; else"
                                + " echo \"$f: ${err##*: }\"; fi; done",
                        cg.toString(), "--"));
                argv.addAll(List.of(args));
                Process p = new ProcessBuilder(argv).redirectErrorStream(true).start();
                p.getOutputStream().close();
                p.getInputStream().transferTo(System.out);
                System.out.println("child exited with " + p.waitFor() + " (Operation not permitted: fenced off;"
                        + " No such device or address: allowed, but no driver answers on this host)");
            } finally {
                Files.deleteIfExists(cg);
                s.release(a.id());
            }
        }
    }
}
