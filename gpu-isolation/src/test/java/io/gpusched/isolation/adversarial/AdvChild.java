package io.gpusched.isolation.adversarial;

import io.gpusched.isolation.CgroupDeviceIsolator;
import java.nio.file.Path;

/** A child JVM that fences a cgroup, says so, and waits to be killed: its fence is left behind. */
public final class AdvChild {
    private AdvChild() {
    }

    /** @param args devRoot procRoot cgroup mechanism(V1|V2) gpuIndex */
    public static void main(String[] args) throws Exception {
        CgroupDeviceIsolator iso = CgroupDeviceIsolator.builder().hostDevices(Adv.nvDevices()).devRoot(Path.of(args[0]))
                .procRoot(Path.of(args[1])).mechanism(CgroupDeviceIsolator.Mechanism.valueOf(args[3])).build();
        iso.fence(Path.of(args[2]), Adv.alloc(Adv.nvDevices(), Integer.parseInt(args[4])));
        System.out.println("FENCED");
        System.out.flush();
        Thread.sleep(60_000);
    }
}
