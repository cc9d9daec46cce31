package io.gpusched.core.strategy;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.AllocationStrategy.Choice;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The search's reused tables ({@link SearchScratch}): one strategy serving several threads at once (decisions run
 * outside the lock) must answer each request exactly as a strategy of its own answers it alone, on nodes of different
 * sizes (tables of different sizes handed between calls).
 */
class SearchScratchTest {

    record Case(SchedulingView view, GpuRequest request) {
    }

    @Test
    void concurrentSearchesOnOneStrategyAnswerAsAloneDoes() throws Exception {
        Random rnd = new Random(2337);
        List<Case> cases = new ArrayList<>();
        for (int node = 0; node < 6; node++) {
            int n = 24 + rnd.nextInt(72);
            List<GpuDevice> devices = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                devices.add(TightBoundSearchTest.device(i, n));
            }
            GpuTopology t = TightBoundSearchTest.topology(rnd, devices, 1);
            List<DeviceState> all = new ArrayList<>();
            List<DeviceState> free = new ArrayList<>();
            for (GpuDevice d : devices) {
                DeviceState s = rnd.nextInt(4) == 0 ? TightBoundSearchTest.held(d) : DeviceState.idle(d,
                        GpuHealth.HEALTHY);
                all.add(s);
                if (s.isIdle()) {
                    free.add(s);
                }
            }
            SchedulingView v = view(List.copyOf(all), List.copyOf(free), t);
            for (int k : new int[]{2, 3, free.size() / 4, free.size() / 2}) {
                cases.add(new Case(v, GpuRequest.builder().count(k).build()));
            }
        }
        for (Objective o : Objective.values()) {
            List<Choice> alone = new ArrayList<>();
            for (Case c : cases) {
                alone.add(new TopologyAwareStrategy(o, 200_000).choose(c.request(), c.view()));
            }
            TopologyAwareStrategy shared = new TopologyAwareStrategy(o, 200_000);
            ExecutorService pool = Executors.newFixedThreadPool(4);
            try {
                CountDownLatch start = new CountDownLatch(1);
                List<Future<List<String>>> futures = new ArrayList<>();
                for (int th = 0; th < 4; th++) {
                    int seed = th;
                    futures.add(pool.submit(() -> {
                        start.await();
                        List<String> wrong = new ArrayList<>();
                        Random r = new Random(seed);
                        for (int i = 0; i < 150; i++) {
                            int x = r.nextInt(cases.size());
                            Choice got = shared.choose(cases.get(x).request(), cases.get(x).view());
                            if (!got.equals(alone.get(x))) {
                                wrong.add("case " + x + ": " + got + " alone " + alone.get(x));
                            }
                        }
                        return wrong;
                    }));
                }
                start.countDown();
                for (Future<List<String>> f : futures) {
                    assertThat(f.get(120, TimeUnit.SECONDS)).as(o + ": answers that differ from a search alone")
                            .isEmpty();
                }
            } finally {
                pool.shutdownNow();
            }
        }
    }

    static SchedulingView view(List<DeviceState> all, List<DeviceState> cands, GpuTopology t) {
        return new SchedulingView() {
            @Override
            public List<DeviceState> devices() {
                return all;
            }

            @Override
            public List<DeviceState> candidates() {
                return cands;
            }

            @Override
            public DeviceState device(int index) {
                return all.get(index);
            }

            @Override
            public GpuTopology topology() {
                return t;
            }

            @Override
            public Instant now() {
                return Instant.EPOCH;
            }
        };
    }
}
