package io.gpusched.service.adversarial.durability;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.server.ConsoleServer;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceRoutes;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;

/**
 * The node service in a JVM of its own, for {@link HandOffCrashTest} to kill: a simulated 8-GPU node
 * ({@code dgx1-v100}) with a durable ledger in {@code args[0]}, served on the Unix socket {@code args[1]}; prints
 * {@code READY} once it listens, then serves until killed.
 */
public final class HandOffServiceChild {
    private HandOffServiceChild() {
    }

    public static void main(String[] args) throws Exception {
        Path state = Path.of(args[0]);
        GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx1-v100")).stateDir(state)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
        NodeService svc = NodeService.builder().scheduler(s).config(GpuConfig.defaults()).stateDir(state)
                .jobs(null, "not in this test").build().start();
        ServiceRoutes routes = new ServiceRoutes(svc);
        ConsoleServer.Builder b = ConsoleServer.builder().scheduler(s).stateDir(state).listen(
                new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).unixSocket(Path.of(args[1])).threads(64);
        routes.routes().forEach(b::route);
        ConsoleServer c = b.build();
        routes.console(c::serveOwn);
        c.start();
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
