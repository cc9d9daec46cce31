package io.gpusched.core.host;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * Which inventory a host opens, in the one syntax every gpusched host accepts (the CLI's {@code --simulate}, the
 * engines' {@code inventory} settings, the console): {@code auto} (the best available provider), {@code
 * simulated:<profile|file.yaml>} (a simulated node: a built-in profile or a YAML node description), or a
 * comma-separated list of provider names tried in order ({@code nvml}, {@code nvml,procfs}, {@code amd-sysfs}).
 *
 * @param kind      which form
 * @param simulated the profile or file, for {@link Kind#SIMULATED}; empty otherwise
 * @param providers provider names in order, for {@link Kind#PROVIDERS}; empty otherwise
 */
public record InventorySpec(Kind kind, String simulated, List<String> providers) {

    /** The forms of a spec. */
    public enum Kind {
        /** The best available provider ({@code auto}). */
        AUTO,
        /** A simulated node ({@code simulated:dgx1-v100}, {@code simulated:/etc/node.yaml}). */
        SIMULATED,
        /** Named providers, first available wins ({@code nvml,procfs}). */
        PROVIDERS
    }

    /** {@code auto}. */
    public static final InventorySpec AUTO = new InventorySpec(Kind.AUTO, "", List.of());

    /** Checks the parts agree with the kind. */
    public InventorySpec {
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(simulated, "simulated");
        providers = List.copyOf(providers);
        if ((kind == Kind.SIMULATED) == simulated.isEmpty() || (kind == Kind.PROVIDERS) == providers.isEmpty()) {
            throw new IllegalArgumentException("inconsistent inventory spec " + kind + " " + simulated + " "
                    + providers);
        }
    }

    /**
     * @param text {@code auto}, {@code simulated:<profile|file>} or {@code provider[,provider...]}
     * @return the spec
     * @throws GpuConfigException naming the text and the valid forms
     */
    public static InventorySpec parse(String text) {
        if (text == null) {
            throw invalid("null", "no value");
        }
        String t = text.strip();
        if (t.isEmpty() || t.equals("auto")) {
            return AUTO;
        }
        if (t.startsWith(GpuInventories.SIMULATED_PREFIX)) {
            String what = t.substring(GpuInventories.SIMULATED_PREFIX.length()).strip();
            if (what.isEmpty()) {
                throw invalid(text, "simulated: needs a profile (" + String.join(", ",
                        GpuInventories.simulatedProfiles()) + ") or the path of a YAML node description");
            }
            return new InventorySpec(Kind.SIMULATED, what, List.of());
        }
        List<String> names = new ArrayList<>();
        for (String part : t.split(",", -1)) {
            String n = part.strip().toLowerCase(Locale.ROOT);
            if (!n.matches("[a-z][a-z0-9-]{0,39}")) {
                throw invalid(text, "\"" + part.strip() + "\" is not a provider name");
            }
            if (n.equals("auto")) {
                throw invalid(text, "auto cannot be combined with provider names");
            }
            if (!names.contains(n)) {
                names.add(n);
            }
        }
        return new InventorySpec(Kind.PROVIDERS, "", names);
    }

    /**
     * Parses a host's setting and checks that every provider it names is on this class path, so a typo fails where
     * the setting is read rather than when the node opens.
     *
     * @param text as {@link #parse}
     * @return the spec
     * @throws GpuConfigException naming the text, the unknown provider and the providers this class path has
     */
    public static InventorySpec parseKnown(String text) {
        InventorySpec spec = parse(text);
        if (spec.kind() == Kind.PROVIDERS) {
            List<String> known = GpuInventories.providers().stream().map(GpuInventories.ProviderStatus::name)
                    .toList();
            for (String p : spec.providers()) {
                if (!known.contains(p)) {
                    throw new GpuConfigException("inventory \"" + text + "\" names \"" + p + "\", which is no "
                            + "provider on this class path; valid are auto, simulated:<profile> ("
                            + String.join(", ", GpuInventories.simulatedProfiles()) + ") or simulated:<node.yaml>, "
                            + "and the providers " + known);
                }
            }
        }
        return spec;
    }

    /** @return a simulated spec for a profile or a YAML file */
    public static InventorySpec simulated(String profileOrFile) {
        return parse(GpuInventories.SIMULATED_PREFIX + profileOrFile);
    }

    private static GpuConfigException invalid(String text, String why) {
        return new GpuConfigException("inventory \"" + text + "\" is not valid: " + why + "; valid forms are auto, "
                + "simulated:<profile> (" + String.join(", ", GpuInventories.simulatedProfiles())
                + ") or simulated:<node.yaml>, and provider names in order, e.g. nvml or nvml,procfs");
    }

    /** @return whether this spec asks for a simulated node */
    public boolean isSimulated() {
        return kind == Kind.SIMULATED;
    }

    /**
     * Opens the inventory.
     *
     * @param config the host's configuration ({@code gpu.backends} is used by {@code auto} only)
     * @return the open inventory; the caller closes it
     * @throws io.gpusched.core.BackendUnavailableException when no named or detected provider can serve
     */
    public GpuInventory open(GpuConfig config) {
        return switch (kind) {
            case AUTO -> GpuInventories.detect(config);
            case SIMULATED -> GpuInventories.simulated(simulated);
            case PROVIDERS -> GpuInventories.detect(config.withBackends(providers));
        };
    }

    /** @return the spec as it parses back: {@code auto}, {@code simulated:x}, {@code nvml,procfs} */
    @Override
    public String toString() {
        return switch (kind) {
            case AUTO -> "auto";
            case SIMULATED -> GpuInventories.SIMULATED_PREFIX + simulated;
            case PROVIDERS -> String.join(",", providers);
        };
    }
}
