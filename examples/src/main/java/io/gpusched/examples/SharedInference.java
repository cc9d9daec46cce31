package io.gpusched.examples;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;
import io.gpusched.core.WorkloadHint;
import io.gpusched.cuda.CudaEnvironmentResolver;
import io.gpusched.cuda.CudaRequirement;
import java.util.List;

/** Inference services sharing A10s: memory reservations packed onto shared GPUs, with the MPS limits each job gets. */
public final class SharedInference {
    private SharedInference() {
    }

    /** @param args ignored */
    public static void main(String[] args) {
        try (GpuInventory node = GpuInventories.simulated("pcie-4xa10");
             GpuScheduler s = GpuScheduler.builder().inventory(node).auditLogging(false).build()) {
            CudaEnvironmentResolver cuda = CudaEnvironmentResolver.builder().installations(List.of()).build();
            for (String service : new String[]{"embeddings", "reranker", "ocr", "asr", "llm-small"}) {
                Allocation a = s.allocate(GpuRequest.builder().shared(MemorySize.parse("6GB"))
                        .hint(WorkloadHint.INFERENCE).jobId(service).build());
                var env = cuda.resolve(a, CudaRequirement.NONE).variables();
                System.out.println(service + " -> GPU " + a.deviceIndices() + "  MPS memory "
                        + env.get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") + ", threads "
                        + env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") + "%");
            }
            s.devices().forEach(d -> System.out.println("GPU " + d.index() + ": " + d.sharedHolders() + " services, "
                    + d.reservableMemory().toHumanString() + " still reservable"));
        }
    }
}
