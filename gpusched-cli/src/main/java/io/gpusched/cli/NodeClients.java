package io.gpusched.cli;

import com.sun.security.auth.module.UnixSystem;
import io.gpusched.client.NodeClient;
import io.gpusched.client.NodeInfo;
import io.gpusched.client.NodeServiceException;
import io.gpusched.client.ServiceClient;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.host.InventorySpec;
import java.nio.file.Path;
import java.util.Optional;

/**
 * Which {@link NodeClient} a command works against, by one rule for every command that allocates or reads the node
 * ({@code allocate}, {@code release}, {@code renew}, {@code status}, {@code list}, {@code watch}, {@code env},
 * {@code run}, {@code jobs}, {@code logs}, {@code cancel}, {@code queue}):
 * <ol>
 *   <li>{@code --state-dir DIR} given: the local ledger in that directory, on purpose (no service is asked);</li>
 *   <li>else the node service, when one answers on its socket ({@code $GPUSCHED_SOCKET}, else
 *       {@code /run/gpusched/gpusched.sock}), for every user, root too. With {@code --simulate X} the service is used
 *       only when it serves that same simulated node; otherwise the command is refused, naming both;</li>
 *   <li>else, with {@code --simulate}: a local ledger of that simulated node (a private one for a non-root user);</li>
 *   <li>else root: the node's local ledger ({@code /var/lib/gpusched}), as before the service;</li>
 *   <li>else (an ordinary user on a real node): refused in one line naming the socket, how an admin starts the
 *       service, and {@code --state-dir DIR} for a private ledger on purpose. Never a silent private ledger.</li>
 * </ol>
 * A socket that is there but unusable (not a socket, not permitted, a service that hangs or answers garbage) is an
 * error, not a reason to fall back.
 */
public final class NodeClients {
    private NodeClients() {
    }

    /**
     * @param root    the command's global options
     * @param options what only a local ledger follows (refused when the service serves the command)
     * @return the client to use
     * @throws CliException         when no client may be used (see the rule)
     * @throws NodeServiceException when the service's socket is there but cannot be used
     */
    public static NodeClient open(GpuschedCommand root, LocalOptions options) {
        if (root.stateDir().isPresent()) {
            return local(root, options, "--state-dir " + root.stateDir().get() + " was given");
        }
        Path socket = ServiceClient.defaultSocket(root.environment());
        ServiceClient service = ServiceClient.connect(socket);
        NodeInfo node;
        try {
            node = service.node();
        } catch (NodeServiceException e) {
            if (e.kind() != NodeServiceException.Kind.UNREACHABLE || e.reason().equals("NOT_A_SOCKET")) {
                throw e;
            }
            return noService(root, options, socket, e);
        }
        if (root.simulate().isPresent()) {
            String wanted = simulatedBackend(root.simulate().get(), root.config());
            if (!node.simulated() || !node.backend().equals(wanted)) {
                throw new CliException("--simulate " + root.simulate().get() + " asks for " + wanted + ", but the"
                        + " node service on " + socket + " serves " + node.backend() + " (" + node.gpus() + " GPUs):"
                        + " drop --simulate to use the service's node, or pass --state-dir DIR for a ledger of your"
                        + " own");
            }
        }
        options.given().ifPresent(given -> {
            throw new CliException(given + " applies to a local ledger only; the node service on " + socket
                    + " decides this itself (its configuration): drop it, or pass --state-dir DIR for a ledger of"
                    + " your own");
        });
        return service;
    }

    private static NodeClient noService(GpuschedCommand root, LocalOptions options, Path socket,
            NodeServiceException e) {
        String why = "no node service answers on " + socket + " (" + cause(e) + ")";
        if (root.simulate().isPresent()) {
            return local(root, options, why + ", and --simulate " + root.simulate().get() + " was given");
        }
        if (uid() == 0) {
            return local(root, options, why + ", and root uses the node's own ledger");
        }
        throw new CliException(why + "; on a shared node an admin starts it (sudo systemctl enable --now"
                + " gpusched, or sudo gpusched serve), and " + ServiceClient.SOCKET_ENV + " names another socket;"
                + " for a private ledger of your own on purpose, pass --state-dir DIR");
    }

    private static String cause(NodeServiceException e) {
        String m = e.getMessage();
        if (m.contains("no such file")) {
            return "no such socket";
        }
        if (m.contains("connection refused")) {
            return "connection refused: the service is not running";
        }
        return m;
    }

    private static LocalNodeClient local(GpuschedCommand root, LocalOptions options, String why) {
        return new LocalNodeClient(root.simulate(), root.config(), root.stateDir(), options, why, root.err());
    }

    /** @return the backend name a simulated node of {@code profile} has ({@code simulated:dgx1-v100}) */
    static String simulatedBackend(String profile, Optional<Path> configFile) {
        GpuConfig config = configFile.map(GpuConfig::load).orElse(GpuConfig.defaults());
        try (GpuInventory inv = InventorySpec.simulated(profile).open(config)) {
            return inv.backend();
        }
    }

    /** @return this process's uid */
    static long uid() {
        return new UnixSystem().getUid();
    }
}
