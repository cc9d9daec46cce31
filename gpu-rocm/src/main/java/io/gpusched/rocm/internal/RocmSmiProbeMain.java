package io.gpusched.rocm.internal;

import com.sun.jna.Native;
import java.io.File;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * The child-process side of the ROCm SMI probe: binds the library, makes every call the inventory makes when it opens
 * and samples ({@code rsmi_init}, device count, PCI id, name, unique id, VRAM, one metric sweep, {@code
 * rsmi_shut_down})
 * and prints one line per step. If the library kills a process on this host's sysfs, it kills this one. Internal.
 */
public final class RocmSmiProbeMain {
    private RocmSmiProbeMain() {
    }

    /** @return our classes and JNA, from where they were loaded (works under application-server class loaders) */
    public static String classpath() {
        List<String> parts = new ArrayList<>();
        for (Class<?> c : List.of(RocmSmiProbeMain.class, Native.class)) {
            try {
                var src = c.getProtectionDomain().getCodeSource();
                if (src == null || src.getLocation() == null) {
                    throw new IllegalStateException("no code source for " + c.getName());
                }
                String path = Path.of(src.getLocation().toURI()).toString();
                if (!parts.contains(path)) {
                    parts.add(path);
                }
            } catch (URISyntaxException | SecurityException | IllegalArgumentException e) {
                throw new IllegalStateException("cannot locate " + c.getName() + ": " + e.getMessage());
            }
        }
        return String.join(File.pathSeparator, parts);
    }

    /** @param args optional library path (empty string or none: the soname search) */
    public static void main(String[] args) {
        Optional<Path> lib = args.length > 0 && !args[0].isEmpty() ? Optional.of(Path.of(args[0])) : Optional.empty();
        try {
            say("bound " + RocmSmiBinding.acquire(lib));
        } catch (RocmSmiBinding.LoadException e) {
            say("load " + e.getMessage());
            System.exit(0);
        }
        int rc = RocmSmiBinding.Core.rsmi_init(0);
        say("init " + rc);
        if (rc == 0) {
            RocmSmiReader r = new RocmSmiReader();
            int n = r.deviceCount();
            say("devices " + n);
            int[] idx = new int[Math.max(n, 0)];
            for (int i = 0; i < idx.length; i++) {
                idx[i] = i;
                OptionalLong bdf = r.bdfId(i);
                r.name(i);
                r.uniqueId(i);
                r.vramTotal(i);
                say("device " + i + " " + (bdf.isPresent() ? Long.toHexString(bdf.getAsLong()) : "-"));
            }
            new RocmSmiReader.Sampler(idx).sweep();
            RocmSmiBinding.Core.rsmi_shut_down();
        }
        say("ok");
        System.exit(0);
    }

    private static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
