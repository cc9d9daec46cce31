package io.gpusched.cli.commands;

import io.gpusched.cli.Node;
import io.gpusched.client.AllocationEnvironment;
import io.gpusched.core.GpuConfig;
import io.gpusched.cuda.CudaEnvironmentResolver;
import io.gpusched.cuda.CudaSearch;
import java.io.PrintStream;

/** The CUDA environment of an allocation: how a local ledger resolves it, and how allocate prints it. */
public final class CudaOutput {
    private CudaOutput() {
    }

    static CudaEnvironmentResolver resolver(Node n) {
        return resolver(n.config());
    }

    /** @return the resolver of a configuration's CUDA search paths */
    public static CudaEnvironmentResolver resolver(GpuConfig config) {
        return CudaEnvironmentResolver.builder()
                .search(CudaSearch.host(config.cudaPaths())).build();
    }

    static void printEnvironment(PrintStream out, AllocationEnvironment env) {
        env.variables().forEach((k, v) -> out.println("  " + k + "=" + v));
        env.pathPrepends().forEach((k, v) -> out.println("  " + k + "=" + String.join(":", v) + ":$" + k));
        env.installation().ifPresent(i -> out.println("  (CUDA " + i.version().orElse("?") + " at " + i.root()
                + env.compatibility().map(c -> ", " + c).orElse("") + ")"));
        env.notes().forEach(note -> out.println("  note: " + note));
    }
}
