package io.gpusched.kubernetes;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Decides which resource names a node's devices are advertised under, and their ids. Whole NVIDIA GPUs go to the
 * NVIDIA resource, AMD GPUs and partitions to the AMD resource, MIG partitions to {@code <domain>/mig-<profile>}
 * (mixed)
 * or the NVIDIA resource (single). A device's id is its UUID (plus {@code ::<replica>} under time-slicing); a UUID too
 * long for the kubelet's 63 characters is replaced by {@code gpu-<index>}.
 */
public final class ResourcePlan {
    /** A MIG profile in a device name or property: {@code 1g.10gb}, {@code 3g.40gb}, {@code 1g.10gb+me}. */
    private static final Pattern MIG_PROFILE = Pattern.compile("(?i)\\b(\\d+g\\.\\d+gb(\\+[a-z]+)?)");

    private ResourcePlan() {
    }

    /**
     * @param devices the inventory's devices
     * @param config  names and replicas
     * @param notes   receives one line per device left out, and why
     * @return the resources, each with at least one id, in order of first device
     */
    public static List<AdvertisedResource> plan(List<GpuDevice> devices, DevicePluginConfig config,
            List<String> notes) {
        Map<String, List<AdvertisedResource.Entry>> byName = new LinkedHashMap<>();
        for (GpuDevice d : devices) {
            Optional<String> resource = resourceOf(d, config, notes);
            if (resource.isEmpty()) {
                continue;
            }
            List<AdvertisedResource.Entry> entries = byName.computeIfAbsent(resource.get(), k -> new ArrayList<>());
            for (int r = 0; r < config.replicas(); r++) {
                entries.add(new AdvertisedResource.Entry(id(d, r, config.replicas()), d, r));
            }
        }
        List<AdvertisedResource> out = new ArrayList<>();
        byName.forEach((name, entries) -> out.add(new AdvertisedResource(name, entries)));
        return out;
    }

    static String id(GpuDevice d, int replica, int replicas) {
        String suffix = replicas == 1 ? "" : "::" + replica;
        String base = d.uuid().length() + suffix.length() <= DevicePluginConfig.MAX_ID_LENGTH
                && d.uuid().chars().allMatch(c -> c > 32 && c < 127) ? d.uuid() : "gpu-" + d.index();
        return base + suffix;
    }

    private static Optional<String> resourceOf(GpuDevice d, DevicePluginConfig c, List<String> notes) {
        if (d.vendor() == GpuVendor.AMD) {
            return Optional.of(c.amdResource());
        }
        if (d.vendor() != GpuVendor.NVIDIA) {
            notes.add("GPU " + d.index() + " (" + d.uuid() + ") is from vendor " + d.vendor()
                    + ", which this plug-in does not advertise");
            return Optional.empty();
        }
        if (!d.isPartition() || c.migStrategy() == DevicePluginConfig.MigStrategy.SINGLE) {
            return Optional.of(c.nvidiaResource());
        }
        Optional<String> profile = migProfile(d);
        if (profile.isEmpty()) {
            notes.add("MIG device " + d.index() + " (" + d.uuid() + ", \"" + d.name() + "\") is not advertised: its"
                    + " MIG profile (e.g. 1g.10gb) is in neither its name nor its mig.profile property; use"
                    + " --mig-strategy single to advertise it as " + c.nvidiaResource());
            return Optional.empty();
        }
        String domain = c.nvidiaResource().substring(0, c.nvidiaResource().indexOf('/'));
        return Optional.of(domain + "/mig-" + profile.get());
    }

    /**
     * @return the MIG profile of a partition as a resource-name part ({@code 1g.10gb}; {@code +me} becomes {@code .me})
     */
    static Optional<String> migProfile(GpuDevice d) {
        String p = d.properties().get("mig.profile");
        Matcher m = MIG_PROFILE.matcher(p != null ? p : d.name());
        if (!m.find()) {
            return Optional.empty();
        }
        return Optional.of(m.group(1).toLowerCase(Locale.ROOT).replace('+', '.'));
    }
}
