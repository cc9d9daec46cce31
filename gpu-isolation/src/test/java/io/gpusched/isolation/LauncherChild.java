package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A child JVM standing in for a service that is SIGKILLed while its job runs. Arguments: devRoot procRoot isoState
 * cgroupParent uid gid user allocationId; it starts {@code sh -c 'sleep 600 & exec sleep 600'} as the user (a main process
 * and a child of it), prints {@code STARTED <pid> <cgroup>} and waits forever.
 */
public final class LauncherChild {
    private LauncherChild() {
    }

    public static void main(String[] args) throws Exception {
        SimulatedGpuInventory host = Fixtures.nvidiaHost();
        CgroupDeviceIsolator iso = CgroupDeviceIsolator.builder().hostDevices(host.devices()).devRoot(Path.of(args[0]))
                .procRoot(Path.of(args[1])).stateDir(Path.of(args[2])).build();
        JobLauncher launcher = JobLauncher.builder().isolator(iso).cgroupParent(Path.of(args[3])).build();
        GpuDevice d = host.devices().get(1);
        Allocation a = new Allocation(args[7], List.of(d), GpuRequest.builder().build(), Instant.now());
        JobSpec spec =
                new JobSpec(List.of("/bin/sh", "-c", "sleep 600 & exec sleep 600"), Map.of("PATH", "/usr/bin:/bin"),
                        Path.of("/"), Long.parseLong(args[4]), Long.parseLong(args[5]), args[6], Optional.empty());
        LaunchedJob j = launcher.launch(args[7], spec, a);
        System.out.println("STARTED " + j.pid() + " " + j.cgroup());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
