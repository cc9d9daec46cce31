package io.gpusched.yarn;

import io.gpusched.core.Allocation;
import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerException;
import io.gpusched.core.NodeLedgerView;
import io.gpusched.core.host.ExitCode;
import io.gpusched.core.host.InventorySpec;
import io.gpusched.core.host.StateDirectory;
import io.gpusched.cuda.CudaEnvironment;
import io.gpusched.cuda.CudaEnvironmentResolver;
import io.gpusched.cuda.CudaRequirement;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Which GPUs a YARN container was given, read from the node ledger where {@link GpuschedDevicePlugin} records them.
 * YARN hands a device plugin's environment only to Docker containers; a default-runtime container learns its GPUs
 * here, by its {@code CONTAINER_ID} (the {@code gpusched env} command does the same). A container runs as another user
 * than the NodeManager, so it reads the ledger without its lock and without writing ({@link NodeLedgerView}):
 *
 * <pre>{@code
 * try (GpuInventory inv = InventorySpec.parse("auto").open(GpuConfig.defaults())) {
 *     NodeLedgerView ledger = NodeLedgerView.read(StateDirectory.forNode(Optional.empty(), inv), inv);
 *     Map<String, String> env = YarnContainerGpus.environment(ledger, System.getenv("CONTAINER_ID"),
 *             CudaEnvironmentResolver.builder().build()).orElseThrow();
 * }
 * }</pre>
 */
public final class YarnContainerGpus {
    /** The allocation label (and job id) that carries the container id. */
    public static final String LABEL = "yarn.container";
    /** The owner the NodeManager's plug-in records its containers' allocations under. */
    public static final String OWNER = "yarn";
    /** YARN's container id forms: {@code container_<clusterTs>_<app>_<attempt>_<n>}, optionally with an epoch. */
    private static final Pattern CONTAINER_ID = Pattern.compile("container_(e\\d+_)?\\d+_\\d+_\\d+_\\d+");

    private YarnContainerGpus() {
    }

    /**
     * @param ledger      a scheduler over the node ledger the NodeManager's plugin writes (caught up first)
     * @param containerId a YARN container id ({@code container_1700000000000_0001_01_000002})
     * @return the container's live allocation, or empty when the ledger has none for it (finished, or never given
     *         GPUs)
     * @throws IllegalArgumentException when {@code containerId} is not a YARN container id
     */
    public static Optional<Allocation> find(GpuScheduler ledger, String containerId) {
        check(containerId);
        ledger.refresh();
        return find(ledger.allocations(), containerId);
    }

    /**
     * @param ledger      the node ledger the NodeManager's plugin writes, as read by the container (no lock, no write)
     * @param containerId a YARN container id ({@code container_1700000000000_0001_01_000002})
     * @return the container's live allocation, or empty when the ledger has none for it (finished, or never given
     *         GPUs)
     * @throws IllegalArgumentException when {@code containerId} is not a YARN container id
     */
    public static Optional<Allocation> find(NodeLedgerView ledger, String containerId) {
        check(containerId);
        return find(ledger.allocations(), containerId);
    }

    private static Optional<Allocation> find(List<Allocation> live, String containerId) {
        return live.stream().filter(a -> isContainerRecord(a) && containerId.equals(a.request().labels().get(LABEL)))
                .findFirst();
    }

    /**
     * @param a an allocation of the node ledger
     * @return whether it is a YARN container's record: the plug-in's owner ({@value #OWNER}) and the container label.
     *         Any process may put the label on its own request; only the plug-in's records are YARN's (counted in its
     *         capacity, released when their container ends)
     */
    public static boolean isContainerRecord(Allocation a) {
        return a.request().labels().containsKey(LABEL) && a.owner().filter(OWNER::equals).isPresent();
    }

    /**
     * @return the job environment of the container's GPUs ({@code CUDA_VISIBLE_DEVICES} and the rest, path additions
     *         joined with {@code :}), or empty when the ledger has no allocation for it
     * @throws IllegalArgumentException when {@code containerId} is not a YARN container id
     */
    public static Optional<Map<String, String>> environment(GpuScheduler ledger, String containerId,
            CudaEnvironmentResolver resolver) {
        return find(ledger, containerId).map(a -> environment(resolver.resolve(a, CudaRequirement.NONE)));
    }

    /**
     * @return the job environment of the container's GPUs, or empty when the ledger has no allocation for it
     * @throws IllegalArgumentException when {@code containerId} is not a YARN container id
     */
    public static Optional<Map<String, String>> environment(NodeLedgerView ledger, String containerId,
            CudaEnvironmentResolver resolver) {
        return find(ledger, containerId).map(a -> environment(resolver.resolve(a, CudaRequirement.NONE)));
    }

    /**
     * @return the variables of a job environment, path additions joined with {@code :} (a container has no value of
     *         its own to extend); this class loads no Hadoop class, so hosts without Hadoop (the CLI) may use it
     */
    public static Map<String, String> environment(CudaEnvironment ce) {
        Map<String, String> out = new LinkedHashMap<>(ce.variables());
        ce.pathPrepends().forEach((k, dirs) -> {
            if (!dirs.isEmpty()) {
                out.put(k, String.join(":", dirs));
            }
        });
        return out;
    }

    /**
     * Prints a container's environment as {@code export} lines, for containers without the gpusched command:
     * {@code eval "$(java -cp gpusched-yarn-<version>.jar:slf4j-api.jar io.gpusched.yarn.YarnContainerGpus)"}.
     * Arguments: {@code [--inventory SPEC] [--state-dir DIR] [CONTAINER_ID]} (defaults: {@code auto}, the
     * {@link io.gpusched.core.host.StateDirectory} rule, {@code $CONTAINER_ID}). It only reads the ledger
     * ({@link NodeLedgerView}), so it runs as any user who may read the state directory. Exit 2 on bad arguments, 3
     * when the ledger has no GPUs for the container, 4 when the node cannot be read (no GPU backend; the ledger
     * absent, unreadable by this user, not trusted or damaged), each with one line on standard error: the codes of
     * {@link ExitCode}, which {@code gpusched env} exits with for the same errors.
     *
     * @param args the arguments
     */
    public static void main(String[] args) {
        String inventory = "auto";
        Optional<Path> dir = Optional.empty();
        String id = System.getenv("CONTAINER_ID");
        InventorySpec spec;
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--inventory" -> inventory = args[++i];
                    case "--state-dir" -> dir = Optional.of(Path.of(args[++i]));
                    default -> id = args[i];
                }
            }
            check(id);
            spec = InventorySpec.parse(inventory);
        } catch (IllegalArgumentException | ArrayIndexOutOfBoundsException | GpuConfigException e) {
            System.err.println("gpusched: " + (e instanceof ArrayIndexOutOfBoundsException ? "an option lacks its value"
                    : e.getMessage()) + "; usage: YarnContainerGpus [--inventory SPEC] [--state-dir DIR]"
                    + " [CONTAINER_ID]");
            System.exit(EXIT_USAGE);
            return;
        }
        int code = print(spec, dir, id, System.out, System.err);
        if (code != 0) {
            System.exit(code);
        }
    }

    /** Exit code of {@link #main} on bad arguments (the one table: {@link ExitCode}). */
    static final int EXIT_USAGE = ExitCode.REFUSED.code();
    /** Exit code of {@link #main} when the ledger has no GPUs for the container. */
    static final int EXIT_NO_GPUS = ExitCode.NO_GPUS.code();
    /** Exit code of {@link #main} when the node cannot be read (backend, ledger). */
    static final int EXIT_UNREADABLE = ExitCode.NODE_UNREADABLE.code();

    /** What {@link #main} does once its arguments are read; @return its exit code */
    static int print(InventorySpec spec, Optional<Path> dir, String id, PrintStream out, PrintStream err) {
        try (GpuInventory inv = spec.open(GpuConfig.defaults())) {
            Path stateDir = StateDirectory.forNode(dir, inv);
            Optional<Allocation> a = find(NodeLedgerView.read(stateDir, inv), id);
            if (a.isEmpty()) {
                err.println("gpusched: container " + id + " has no GPUs in the node ledger " + stateDir);
                return EXIT_NO_GPUS;
            }
            out.println("# " + id + ": GPUs " + a.get().deviceIndices() + " (" + a.get().id() + ")");
            environment(CudaEnvironmentResolver.builder().build().resolve(a.get(), CudaRequirement.NONE))
                    .forEach((k, v) -> out.println("export " + k + "='" + v.replace("'", "'\\''") + "'"));
            return 0;
        } catch (IllegalArgumentException e) { // an inventory spec naming no known profile or file
            err.println("gpusched: " + e.getMessage() + "; usage: YarnContainerGpus [--inventory SPEC] [--state-dir"
                    + " DIR] [CONTAINER_ID]");
            return EXIT_USAGE;
        } catch (LedgerException e) {
            err.println("gpusched: " + e.kind() + ": " + e.getMessage());
            return EXIT_UNREADABLE;
        } catch (BackendUnavailableException e) {
            err.println("gpusched: no GPU backend is available here: " + e.getMessage());
            return EXIT_UNREADABLE;
        } catch (GpuException e) {
            err.println("gpusched: " + e.getMessage());
            return ExitCode.of(e).code(); // a bad node file or setting is REFUSED, as from `gpusched env`
        }
    }

    /** @return whether {@code s} is a YARN container id (so it names no path but its own) */
    static boolean isContainerId(String s) {
        return s != null && s.length() <= 128 && CONTAINER_ID.matcher(s).matches();
    }

    /** @throws IllegalArgumentException when {@code containerId} is not a YARN container id */
    public static void check(String containerId) {
        if (!isContainerId(containerId)) {
            throw new IllegalArgumentException("\"" + containerId + "\" is not a YARN container id; expected"
                    + " container_<cluster timestamp>_<app>_<attempt>_<number> such as"
                    + " container_1700000000000_0001_01_000002 (YARN sets $CONTAINER_ID in every container)");
        }
    }
}
