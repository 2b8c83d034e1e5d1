// pw-bench-onetbb: oneTBB flow graph on the shapes of bench/shapes.h.
//
// A graph is one continue_node per task and one make_edge per edge, built
// once inside a task_arena of T threads (the calling thread is one of
// them; a global_control caps the pool at T) and rerun by putting a message
// into every root and waiting: a continue_node fires when all its
// predecessors have, then re-arms, so reruns need no rebuilding. spawn has
// no graph: a task_group runs one lambda per task.
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <cstdio>
#include <deque>
#include <memory>
#include <new>
#include <vector>

#include "../shapes.h"

namespace {

using Node = tbb::flow::continue_node<tbb::flow::continue_msg>;

struct TbbRuntime {
  explicit TbbRuntime(int count)
      : control(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(count)),
        arena(count, 1),
        threads(count) {}
  tbb::global_control control;
  tbb::task_arena arena;
  int threads;
};

struct TbbGraph {
  const pw_bench_dag_t* dag = nullptr;
  pw_bench_work_t work{};
  std::unique_ptr<tbb::flow::graph> graph;
  std::deque<Node> nodes;  // a deque: nodes never move
  std::vector<uint32_t> roots;
};

void* tbb_open(uint32_t threads) {
  try {
    auto* rt = new TbbRuntime(static_cast<int>(threads));
    rt->arena.initialize();
    return rt;
  } catch (...) {
    return nullptr;
  }
}

void tbb_close(void* rt) { delete static_cast<TbbRuntime*>(rt); }

void* tbb_prepare(void*, const pw_bench_dag_t* dag, const pw_bench_work_t* work,
                  pw_bench_counts_t*) {
  auto* g = new (std::nothrow) TbbGraph;
  if (g == nullptr) return nullptr;
  g->dag = dag;
  g->work = *work;
  return g;
}

int tbb_build(void* rt, void* graph) {
  auto* r = static_cast<TbbRuntime*>(rt);
  auto* g = static_cast<TbbGraph*>(graph);
  const pw_bench_dag_t* dag = g->dag;
  if (dag->independent) return 0;
  try {
    r->arena.execute([&] {
      g->graph = std::make_unique<tbb::flow::graph>();
      const pw_bench_work_t* work = &g->work;
      for (uint32_t i = 0; i < dag->tasks; ++i) {
        g->nodes.emplace_back(*g->graph, [work, i](const tbb::flow::continue_msg&) {
          pw_bench_task(work, i);
          return tbb::flow::continue_msg();
        });
        uint32_t b = dag->pred_begin[i], e = dag->pred_begin[i + 1];
        for (uint32_t k = b; k < e; ++k) tbb::flow::make_edge(g->nodes[dag->preds[k]], g->nodes[i]);
        if (b == e) g->roots.push_back(i);
      }
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onetbb: build: %s\n", e.what());
    return -1;
  }
  return 0;
}

int tbb_run(void* rt, void* graph) {
  auto* r = static_cast<TbbRuntime*>(rt);
  auto* g = static_cast<TbbGraph*>(graph);
  const pw_bench_work_t* work = &g->work;
  if (g->dag->independent) {
    uint32_t n = g->dag->tasks;
    r->arena.execute([&] {
      tbb::task_group tg;
      for (uint32_t i = 0; i < n; ++i) tg.run([work, i] { pw_bench_task(work, i); });
      tg.wait();
    });
    return 0;
  }
  r->arena.execute([&] {
    for (uint32_t root : g->roots) g->nodes[root].try_put(tbb::flow::continue_msg());
    g->graph->wait_for_all();
  });
  return 0;
}

void tbb_destroy(void* rt, void* graph) {
  auto* r = static_cast<TbbRuntime*>(rt);
  auto* g = static_cast<TbbGraph*>(graph);
  // Nodes are destroyed in the arena they were made in, before the graph.
  r->arena.execute([&] {
    g->nodes.clear();
    g->graph.reset();
  });
  delete g;
}

}  // namespace

int main(int argc, char** argv) {
  pw_bench_runtime_t runtime{};
  runtime.name = "onetbb";
  runtime.open = tbb_open;
  runtime.close = tbb_close;
  runtime.prepare = tbb_prepare;
  runtime.build = tbb_build;
  runtime.run = tbb_run;
  runtime.latency = nullptr;
  runtime.verify = nullptr;
  runtime.destroy = tbb_destroy;
  runtime.stamps = true;
  return pw_bench_shapes_main(argc - 1, argv + 1, &runtime);
}
