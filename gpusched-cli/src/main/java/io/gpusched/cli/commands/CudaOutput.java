package io.gpusched.cli.commands;

import io.gpusched.cli.Node;
import io.gpusched.client.AllocationEnvironment;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.internal.Printable;
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

    /** Prints the environment for a person to read: every value escaped ({@link Printable#escape}). */
    static void printEnvironment(PrintStream out, AllocationEnvironment env) {
        env.variables().forEach((k, v) -> out.println("  " + Printable.escape(k) + "=" + Printable.escape(v)));
        env.pathPrepends().forEach((k, v) -> out.println("  " + Printable.escape(k) + "="
                + Printable.escape(String.join(":", v)) + ":$" + Printable.escape(k)));
        env.installation().ifPresent(i -> out.println("  (CUDA " + Printable.escape(i.version().orElse("?")) + " at "
                + Printable.escape(String.valueOf(i.root())) + env.compatibility().map(c -> ", " + Printable.escape(c))
                        .orElse("")
                + ")"));
        env.notes().forEach(note -> out.println("  note: " + Printable.escape(note)));
    }
}
