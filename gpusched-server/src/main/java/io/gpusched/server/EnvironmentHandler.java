package io.gpusched.server;

import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import io.gpusched.cdi.CdiOptions;
import io.gpusched.cdi.ContainerDevices;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuScheduler;
import io.gpusched.cuda.CudaEnvironment;
import io.gpusched.cuda.CudaEnvironmentResolver;
import io.gpusched.cuda.CudaRequirement;
import io.gpusched.cuda.CudaSearch;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * {@code GET /api/v1/allocations/{id}/environment[?cuda=REQ]}: what a job needs to use one allocation's GPUs, resolved
 * on the node (so a client that may not open the GPUs itself, or has no gpu-cuda, gets it): the CUDA environment
 * ({@link CudaEnvironment#toJson()}'s fields: {@code variables}, {@code pathPrepends}, {@code mounts},
 * {@code installation}, {@code compatibility}, {@code notes}), the allocation's id, and the flags a container runtime
 * needs ({@code container}: {@code dockerArgs} and {@code cdiArgs}, or {@code error} where the device nodes cannot be
 * planned, e.g. on a simulated node without them).
 */
final class EnvironmentHandler implements HttpHandler {
    static final String SUFFIX = "/environment";

    private final GpuScheduler scheduler;
    private final List<Path> cudaPaths;
    private volatile CudaEnvironmentResolver resolver;

    EnvironmentHandler(GpuScheduler scheduler, List<Path> cudaPaths) {
        this.scheduler = scheduler;
        this.cudaPaths = List.copyOf(cudaPaths);
    }

    /** @return whether {@code rawPath} is an allocation's environment */
    static boolean matches(String rawPath) {
        return rawPath.startsWith(AllocationsHandler.PREFIX) && rawPath.endsWith(SUFFIX)
                && rawPath.length() > AllocationsHandler.PREFIX.length() + SUFFIX.length();
    }

    @Override
    public void handle(HttpExchange ex) throws IOException {
        String path = ex.getRequestURI().getRawPath();
        String id = URLDecoder.decode(path.substring(AllocationsHandler.PREFIX.length(), path.length()
                - SUFFIX.length()), StandardCharsets.UTF_8);
        Exchanges.get(ex, () -> {
            Map<String, String> q = Exchanges.query(ex, "cuda");
            CudaRequirement req;
            try {
                req = q.containsKey("cuda") ? CudaRequirement.parse(q.get("cuda")) : CudaRequirement.NONE;
            } catch (IllegalArgumentException e) {
                Exchanges.error(ex, 400, "cuda=" + SampleHistory.printable(q.get("cuda")) + ": " + e.getMessage(),
                        "INVALID_REQUEST");
                return;
            }
            Optional<Allocation> a = scheduler.allocation(id);
            if (a.isEmpty()) {
                Exchanges.error(ex, 404, "no allocation \"" + SampleHistory.printable(id) + "\"",
                        "UNKNOWN_ALLOCATION");
                return;
            }
            CudaEnvironment env;
            try {
                env = resolver().resolve(a.get(), req);
            } catch (GpuException | IllegalArgumentException e) {
                Exchanges.error(ex, 409, e.getMessage(), null);
                return;
            }
            ObjectNode o = Views.MAPPER.createObjectNode();
            o.put("allocation", a.get().id());
            o.setAll((ObjectNode) Views.MAPPER.readTree(env.toJson()));
            ObjectNode container = o.putObject("container");
            try {
                ContainerDevices c = ContainerDevices.of(a.get(), scheduler.inventory().devices(),
                        CdiOptions.defaults());
                c.dockerArgs().forEach(container.putArray("dockerArgs")::add);
                c.cdiArgs().forEach(container.putArray("cdiArgs")::add);
            } catch (GpuException | IllegalArgumentException | UncheckedIOException e) {
                container.put("error", e.getMessage());
            }
            Exchanges.json(ex, 200, o);
        });
    }

    private CudaEnvironmentResolver resolver() {
        CudaEnvironmentResolver r = resolver;
        if (r == null) {
            r = CudaEnvironmentResolver.builder().search(CudaSearch.host(cudaPaths)).build();
            resolver = r;
        }
        return r;
    }
}
