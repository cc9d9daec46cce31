package io.gpusched.kubernetes;

import io.gpusched.core.GpuVendor;
import io.gpusched.core.strategy.TopologyAwareStrategy;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Settings of the device plug-in, validated once by {@link Builder#build()}. Defaults follow the kubelet and NVIDIA's
 * plug-in: {@code /var/lib/kubelet/device-plugins}, resources {@code nvidia.com/gpu} and {@code amd.com/gpu}, MIG
 * partitions as per-profile resources ({@code nvidia.com/mig-1g.10gb}, the "mixed" strategy), one replica per GPU, no
 * CDI.
 *
 * @param pluginDirectory   the kubelet's device-plugin directory (holds {@code kubelet.sock} and the plug-in's sockets)
 * @param kubeletSocket     the file name of the kubelet's registration socket in that directory
 * @param nvidiaResource    resource name of whole NVIDIA GPUs
 * @param amdResource       resource name of AMD GPUs and their partitions
 * @param migStrategy       how NVIDIA MIG partitions are advertised
 * @param replicas          time-slicing: ids advertised per GPU (1: none); shared GPUs get no memory or fault isolation
 * @param cdi               whether Allocate names CDI devices ({@code kind=uuid}) instead of device nodes
 * @param nvidiaCdiKind     CDI kind of NVIDIA devices
 * @param amdCdiKind        CDI kind of AMD devices
 * @param objective         what GetPreferredAllocation maximizes (gpusched's topology objectives)
 * @param devRoot           where the plug-in sees the host's device nodes (to skip optional nodes that do not exist)
 * @param procRoot          where the plug-in sees the host's procfs (dynamic majors, MIG capability minors)
 * @param recoveryHold      how long a device that was unhealthy must read healthy before it is advertised Healthy again
 * @param registerRetry     how long to wait before registering again after the kubelet refused or was not there
 */
public record DevicePluginConfig(
        Path pluginDirectory,
        String kubeletSocket,
        String nvidiaResource,
        String amdResource,
        MigStrategy migStrategy,
        int replicas,
        boolean cdi,
        String nvidiaCdiKind,
        String amdCdiKind,
        TopologyAwareStrategy.Objective objective,
        Path devRoot,
        Path procRoot,
        Duration recoveryHold,
        Duration registerRetry) {

    /** The kubelet's device-plugin directory. */
    public static final Path DEFAULT_PLUGIN_DIRECTORY = Path.of("/var/lib/kubelet/device-plugins");
    /** The kubelet's registration socket file name. */
    public static final String KUBELET_SOCKET = "kubelet.sock";
    /** The only device plugin API version. */
    public static final String API_VERSION = "v1beta1";
    /** Longest device id the kubelet accepts. */
    public static final int MAX_ID_LENGTH = 63;

    /**
     * A Kubernetes extended resource name: a DNS subdomain prefix, a slash, a name of letters, digits, '-', '_', '.'.
     */
    private static final Pattern RESOURCE = Pattern.compile(
            "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9]"
                    + ")?");
    /** A CDI kind: vendor (domain) slash class. */
    private static final Pattern CDI_KIND = Pattern.compile(
            "[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?");

    /** How NVIDIA MIG partitions are advertised. */
    public enum MigStrategy {
        /** Each MIG profile is its own resource, {@code <vendor domain>/mig-<profile>} (NVIDIA's "mixed"). */
        MIXED,
        /** MIG partitions are advertised under the whole-GPU resource name (NVIDIA's "single"). */
        SINGLE
    }

    /** Validates (the builder already did; this guards direct construction). */
    public DevicePluginConfig {
        Objects.requireNonNull(pluginDirectory, "pluginDirectory");
        Objects.requireNonNull(kubeletSocket, "kubeletSocket");
        Objects.requireNonNull(migStrategy, "migStrategy");
        Objects.requireNonNull(objective, "objective");
        Objects.requireNonNull(devRoot, "devRoot");
        Objects.requireNonNull(procRoot, "procRoot");
        Objects.requireNonNull(recoveryHold, "recoveryHold");
        Objects.requireNonNull(registerRetry, "registerRetry");
        checkResource("nvidia resource", nvidiaResource);
        checkResource("amd resource", amdResource);
        if (nvidiaResource.equals(amdResource)) {
            throw new IllegalArgumentException("the NVIDIA and AMD resource names are both \"" + nvidiaResource
                    + "\"; give each vendor its own name");
        }
        if (kubeletSocket.isBlank() || kubeletSocket.contains("/")) {
            throw new IllegalArgumentException("kubelet socket \"" + kubeletSocket
                    + "\" must be a file name in the plug-in directory (no '/'), e.g. kubelet.sock");
        }
        if (replicas < 1 || replicas > 1024) {
            throw new IllegalArgumentException("replicas " + replicas + " is out of range; valid: 1 (no time-slicing)"
                    + " to 1024");
        }
        checkCdiKind("nvidia CDI kind", nvidiaCdiKind);
        checkCdiKind("amd CDI kind", amdCdiKind);
        if (recoveryHold.isNegative() || registerRetry.isNegative() || registerRetry.isZero()) {
            throw new IllegalArgumentException("recovery hold " + recoveryHold + " must be >= 0 and register retry "
                    + registerRetry + " > 0");
        }
    }

    private static void checkResource(String what, String name) {
        if (name == null || name.length() > 253 || !RESOURCE.matcher(name).matches()) {
            throw new IllegalArgumentException(what + " \"" + name + "\" is not a Kubernetes extended resource name;"
                    + " valid: <domain>/<name>, e.g. nvidia.com/gpu");
        }
    }

    private static void checkCdiKind(String what, String kind) {
        if (kind == null || !CDI_KIND.matcher(kind).matches()) {
            throw new IllegalArgumentException(what + " \"" + kind + "\" is not a CDI kind; valid: <vendor>/<class>,"
                    + " e.g. nvidia.com/gpu");
        }
    }

    /** @return the kubelet's registration socket */
    public Path kubeletSocketPath() {
        return pluginDirectory.resolve(kubeletSocket);
    }

    /** @return a builder with the defaults */
    public static Builder builder() {
        return new Builder();
    }

    /** @return the defaults */
    public static DevicePluginConfig defaults() {
        return builder().build();
    }

    /** Builds a {@link DevicePluginConfig}; each setter checks its argument, {@link #build()} the whole. */
    public static final class Builder {
        private Path pluginDirectory = DEFAULT_PLUGIN_DIRECTORY;
        private String kubeletSocket = KUBELET_SOCKET;
        private String nvidiaResource = "nvidia.com/gpu";
        private String amdResource = "amd.com/gpu";
        private MigStrategy migStrategy = MigStrategy.MIXED;
        private int replicas = 1;
        private boolean cdi;
        private String nvidiaCdiKind = "nvidia.com/gpu";
        private String amdCdiKind = "amd.com/gpu";
        private TopologyAwareStrategy.Objective objective = TopologyAwareStrategy.Objective.SET;
        private Path devRoot = Path.of("/dev");
        private Path procRoot = Path.of("/proc");
        private Duration recoveryHold = Duration.ofSeconds(10);
        private Duration registerRetry = Duration.ofSeconds(5);

        private Builder() {
        }

        /** @param v the device-plugin directory @return this */
        public Builder pluginDirectory(Path v) {
            pluginDirectory = Objects.requireNonNull(v, "pluginDirectory");
            return this;
        }

        /** @param v the kubelet socket's file name @return this */
        public Builder kubeletSocket(String v) {
            kubeletSocket = Objects.requireNonNull(v, "kubeletSocket");
            return this;
        }

        /** @param v resource name of NVIDIA GPUs @return this */
        public Builder nvidiaResource(String v) {
            nvidiaResource = v;
            return this;
        }

        /** @param v resource name of AMD GPUs @return this */
        public Builder amdResource(String v) {
            amdResource = v;
            return this;
        }

        /** @param v how MIG partitions are advertised @return this */
        public Builder migStrategy(MigStrategy v) {
            migStrategy = Objects.requireNonNull(v, "migStrategy");
            return this;
        }

        /** @param v ids per GPU (time-slicing; no memory isolation) @return this */
        public Builder replicas(int v) {
            replicas = v;
            return this;
        }

        /** @param v whether Allocate answers with CDI device names @return this */
        public Builder cdi(boolean v) {
            cdi = v;
            return this;
        }

        /** @param v CDI kind of NVIDIA devices @return this */
        public Builder nvidiaCdiKind(String v) {
            nvidiaCdiKind = v;
            return this;
        }

        /** @param v CDI kind of AMD devices @return this */
        public Builder amdCdiKind(String v) {
            amdCdiKind = v;
            return this;
        }

        /** @param v what GetPreferredAllocation maximizes @return this */
        public Builder objective(TopologyAwareStrategy.Objective v) {
            objective = Objects.requireNonNull(v, "objective");
            return this;
        }

        /** @param v where the host's /dev is seen @return this */
        public Builder devRoot(Path v) {
            devRoot = Objects.requireNonNull(v, "devRoot");
            return this;
        }

        /** @param v where the host's /proc is seen @return this */
        public Builder procRoot(Path v) {
            procRoot = Objects.requireNonNull(v, "procRoot");
            return this;
        }

        /** @param v how long a recovered device must stay healthy before it is advertised again @return this */
        public Builder recoveryHold(Duration v) {
            recoveryHold = Objects.requireNonNull(v, "recoveryHold");
            return this;
        }

        /** @param v wait between registration attempts @return this */
        public Builder registerRetry(Duration v) {
            registerRetry = Objects.requireNonNull(v, "registerRetry");
            return this;
        }

        /** @return the configuration @throws IllegalArgumentException naming the first invalid setting */
        public DevicePluginConfig build() {
            return new DevicePluginConfig(pluginDirectory, kubeletSocket, nvidiaResource, amdResource, migStrategy,
                    replicas, cdi, nvidiaCdiKind, amdCdiKind, objective, devRoot, procRoot, recoveryHold,
                    registerRetry);
        }
    }

    /** @return the CDI kind for a vendor's devices */
    String cdiKind(GpuVendor vendor) {
        return vendor == GpuVendor.AMD ? amdCdiKind : nvidiaCdiKind;
    }

    /** @return empty, or why time-slicing is on (said at start: no memory or fault isolation) */
    public Optional<String> sharingWarning() {
        return replicas == 1 ? Optional.empty() : Optional.of("time-slicing: each GPU is advertised " + replicas
                + " times; containers given the same GPU share its memory and faults (no memory isolation, no fault"
                + " isolation)");
    }
}
