package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.cli.WatchView;
import io.gpusched.core.DeviceState;
import io.gpusched.core.internal.Durations;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched watch}. */
@Command(name = "watch", description = "A live view of the GPUs; Ctrl-C to stop.")
public final class WatchCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Option(names = "--interval", defaultValue = "1s", description = "refresh interval (500ms, 2s, ...)")
    String interval;

    @Option(names = "--count", defaultValue = "0", description = "frames to draw; 0: until Ctrl-C")
    int count;

    @Option(names = "--no-ansi", description = "plain output, one frame after another (for pipes)")
    boolean noAnsi;

    @Override
    public Integer call() throws InterruptedException {
        Duration every = Durations.parse(interval);
        boolean ansi = !noAnsi && System.console() != null;
        try (Node n = root.open(Optional.empty())) {
            Thread restore = new Thread(() -> root.out().print(ansi ? "\u001b[0m\n" : ""));
            Runtime.getRuntime().addShutdownHook(restore);
            Map<Integer, String> previous = new HashMap<>();
            for (int frame = 0; count == 0 || frame < count; frame++) {
                n.scheduler().updateMetrics(n.inventory().sample());
                List<DeviceState> devices = n.scheduler().devices();
                root.out().print(WatchView.render("gpusched watch - " + n.inventory().backend() + " - every "
                        + interval + " (Ctrl-C to stop)", devices, previous, ansi));
                root.out().flush();
                previous.clear();
                for (DeviceState d : devices) {
                    previous.put(d.index(), d.health() + (d.pool() == DeviceState.Pool.IN_POOL ? "" : " "
                            + d.pool()));
                }
                if (count == 0 || frame < count - 1) {
                    Thread.sleep(every.toMillis());
                }
            }
            try {
                Runtime.getRuntime().removeShutdownHook(restore);
            } catch (IllegalStateException shuttingDown) {
                // Ctrl-C arrived as the last frame was drawn: the hook restores the terminal
            }
        }
        return 0;
    }
}
