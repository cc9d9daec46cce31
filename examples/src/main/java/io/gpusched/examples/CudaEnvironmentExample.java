package io.gpusched.examples;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.cuda.CudaEnvironment;
import io.gpusched.cuda.CudaEnvironmentResolver;
import io.gpusched.cuda.CudaInstallations;
import io.gpusched.cuda.CudaRequirement;
import io.gpusched.cuda.CudaSearch;
import java.util.List;

/** Lists this host's CUDA installations and the environment a 2-GPU job would get (JSON). */
public final class CudaEnvironmentExample {
    private CudaEnvironmentExample() {
    }

    /** @param args ignored */
    public static void main(String[] args) {
        CudaInstallations.Discovery d = CudaInstallations.discover(CudaSearch.host(List.of()));
        d.installations().forEach(i -> System.out.println("found " + i));
        d.problems().forEach(p -> System.out.println("problem: " + p));
        try (GpuInventory node = GpuInventories.simulated("dgx-h100");
             GpuScheduler s = GpuScheduler.builder().inventory(node).auditLogging(false).build()) {
            Allocation a = s.allocate(GpuRequest.builder().count(2).build());
            CudaEnvironment env = CudaEnvironmentResolver.builder().installations(d.installations()).build()
                    .resolve(a, CudaRequirement.NONE);
            System.out.println(env.toJson());
        }
    }
}
