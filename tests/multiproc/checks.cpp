#include "checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>

#include "backends/cpu/arith.hpp"

namespace troupe::test {

namespace {

const data_type all_dtypes[] = {
  data_type::uint8,   data_type::int8,    data_type::uint16,  data_type::int16,
  data_type::int32,   data_type::int64,   data_type::float16, data_type::bfloat16,
  data_type::float32, data_type::float64, data_type::boolean};

bool is_unsigned(data_type t) {
  return t == data_type::uint8 || t == data_type::uint16 || t == data_type::boolean;
}

bool is_float(data_type t) {
  return t == data_type::float16 || t == data_type::bfloat16 || t == data_type::float32 ||
         t == data_type::float64;
}

// Small integers keep every sum and product exact in every dtype (bfloat16
// holds integers up to 256 exactly), so results are comparable bit for bit
// whatever order the backend reduces in. A product of a set of more than 9
// ranks (`size`) takes values up to 1 in floating point: 3^10 is past
// float16's range.
double value(unsigned tensor, int rank, size_t i, data_type t, reduce_op op, int size = 0) {
  std::mt19937 gen(tensor * 131 + static_cast<unsigned>(rank) * 7919 + static_cast<unsigned>(i));
  if (t == data_type::boolean)
    return static_cast<double>(gen() % 2);
  const int span = op != reduce_op::product ? 30 : size > 9 && is_float(t) ? 1 : 3;
  int v = static_cast<int>(gen() % static_cast<unsigned>(2 * span + 1)) - span;
  if (is_unsigned(t))
    v = std::abs(v);
  return v;
}

// A typed buffer read and written as doubles.
struct buffer {
  data_type dtype;
  std::vector<char> bytes;

  buffer(data_type t, size_t n) : dtype(t), bytes(n * element_size(t)) {
  }
  size_t count() const {
    return bytes.size() / element_size(dtype);
  }
  void set(size_t i, double v) {
    if (backends::is_half(dtype)) {
      float f = static_cast<float>(v);
      backends::float_to_half(dtype, &f, bytes.data() + 2 * i, 1);
      return;
    }
    backends::with_element_type(dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      reinterpret_cast<T*>(bytes.data())[i] = static_cast<T>(v);
    });
  }
  double get(size_t i) const {
    if (backends::is_half(dtype)) {
      float f;
      backends::half_to_float(dtype, bytes.data() + 2 * i, &f, 1);
      return f;
    }
    double out = 0;
    backends::with_element_type(dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      out = static_cast<double>(reinterpret_cast<const T*>(bytes.data())[i]);
    });
    return out;
  }
  tensor view(shape_t shape) {
    return {bytes.data(), dtype, std::move(shape)};
  }
};

double tolerance(data_type t, double want) {
  switch (t) {
    case data_type::float16: return 1e-3 * (1 + std::abs(want));
    case data_type::bfloat16: return 8e-3 * (1 + std::abs(want));
    case data_type::float32: return 1e-5 * (1 + std::abs(want));
    case data_type::float64: return 1e-12 * (1 + std::abs(want));
    default: return 0;
  }
}

// `x` as an integer of type `t` holds it: wrapped to the type's width, as
// a sum or product computed in the type wraps (7 ranks' products of
// values up to 3 pass int8's and uint8's range).
double wrapped(data_type t, double x) {
  if (is_float(t) || t == data_type::boolean)
    return x;
  double out = x;
  backends::with_element_type(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    out = static_cast<double>(static_cast<T>(static_cast<int64_t>(x)));
  });
  return out;
}

// Every rank's contribution combined as the backend must.
double reduce_reference(unsigned id, int size, size_t i, data_type t, reduce_op op,
                        double pre, double post) {
  // Integers are scaled and combined in their own type: each scaling
  // truncates, and sums and products wrap.
  const auto in_type = [&](double x) { return is_float(t) ? x : wrapped(t, std::trunc(x)); };
  double acc = 0;
  for (int r = 0; r < size; ++r) {
    const double v = in_type(value(id, r, i, t, op, size) * pre);
    if (r == 0)
      acc = v;
    else if (op == reduce_op::min)
      acc = std::min(acc, v);
    else if (op == reduce_op::max)
      acc = std::max(acc, v);
    else if (op == reduce_op::product)
      acc = wrapped(t, acc * v);
    else
      acc = wrapped(t, acc + v);
  }
  if (t == data_type::boolean && op == reduce_op::sum)
    acc = acc != 0;
  if (op == reduce_op::average)
    acc = is_float(t) ? acc / size : std::trunc(acc / size);
  return in_type(acc * post);
}

std::string compare(const buffer& got, size_t offset, size_t n,
                    const std::function<double(size_t)>& want) {
  for (size_t i = 0; i < n; ++i) {
    const double w = want(i);
    const double g = got.get(offset + i);
    if (std::abs(g - w) > tolerance(got.dtype, w))
      return "element " + std::to_string(i) + " is " + std::to_string(g) + ", want " +
             std::to_string(w);
  }
  return {};
}

std::string label(const char* op, data_type t, const std::string& extra = "") {
  return std::string(op) + "." + to_string(t) + (extra.empty() ? "" : "." + extra);
}

void add_allreduce(std::vector<check>& out, unsigned& id, int rank, int size, data_type t,
                   reduce_op op, double pre, double post) {
  ++id;
  const unsigned my = id;
  const size_t n = 1 + (my * 37) % 300;
  auto in = std::make_shared<buffer>(t, n);
  auto res = std::make_shared<buffer>(t, n);
  for (size_t i = 0; i < n; ++i)
    in->set(i, value(my, rank, i, t, op, size));
  auto name = label("allreduce", t, to_string(op)) + (pre != 1.0 ? ".scaled" : "");
  const shape_t shape{static_cast<int64_t>(n)};
  out.push_back({name,
                 [=] { return allreduce(in->view(shape), res->view(shape), name, op, pre, post); },
                 [=](const handle&) {
                   return compare(*res, 0, n, [&](size_t i) {
                     return reduce_reference(my, size, i, t, op, pre, post);
                   });
                 }});
}

// Adasum combined pairwise up the same tree as the distributed algorithm.
std::vector<double> adasum_reference(unsigned id, int size, size_t n, data_type t) {
  std::vector<std::vector<double>> v(static_cast<size_t>(size), std::vector<double>(n));
  for (int r = 0; r < size; ++r)
    for (size_t i = 0; i < n; ++i)
      v[static_cast<size_t>(r)][i] = value(id, r, i, t, reduce_op::sum);
  for (int level = 1; level < size; level *= 2)
    for (int g = 0; g < size; g += 2 * level) {
      auto& a = v[static_cast<size_t>(g)];
      const auto& b = v[static_cast<size_t>(g + level)];
      double dot = 0, na = 0, nb = 0;
      for (size_t i = 0; i < n; ++i) {
        dot += a[i] * b[i];
        na += a[i] * a[i];
        nb += b[i] * b[i];
      }
      const double ac = na > 0 ? 1 - dot / (2 * na) : 1, bc = nb > 0 ? 1 - dot / (2 * nb) : 1;
      for (size_t i = 0; i < n; ++i)
        a[i] = ac * a[i] + bc * b[i];
    }
  return v[0];
}

void add_adasum(std::vector<check>& out, unsigned& id, int rank, int size, data_type t) {
  const unsigned my = ++id;
  const size_t n = 37;
  auto data = std::make_shared<buffer>(t, n);
  for (size_t i = 0; i < n; ++i)
    data->set(i, value(my, rank, i, t, reduce_op::sum));
  auto name = label("allreduce", t, "adasum");
  const shape_t shape{static_cast<int64_t>(n)};
  out.push_back({name,
                 [=] { return allreduce(data->view(shape), data->view(shape), name,
                                        reduce_op::adasum); },
                 [=](const handle&) {
                   auto want = adasum_reference(my, size, n, t);
                   // Partial sums are added in a different order than here.
                   buffer widened(data_type::float64, n);
                   for (size_t i = 0; i < n; ++i)
                     widened.set(i, data->get(i));
                   const double slack = t == data_type::float64   ? 1e-9
                                        : t == data_type::float32 ? 1e-4
                                                                  : 3e-2;
                   for (size_t i = 0; i < n; ++i)
                     if (std::abs(widened.get(i) - want[i]) > slack * (1 + std::abs(want[i])))
                       return "element " + std::to_string(i) + " is " +
                              std::to_string(widened.get(i)) + ", want " +
                              std::to_string(want[i]);
                   return std::string();
                 }});
}

void add_reducescatter(std::vector<check>& out, unsigned& id, int rank, int size,
                       data_type t, reduce_op op) {
  ++id;
  const unsigned my = id;
  const int64_t rows = 2 * size + 1, cols = 3;  // uneven on purpose
  auto in = std::make_shared<buffer>(t, static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < in->count(); ++i)
    in->set(i, value(my, rank, i, t, op));
  auto name = label("reducescatter", t, to_string(op));
  out.push_back({name, [=] { return reducescatter(in->view({rows, cols}), name, op); },
                 [=](const handle& h) -> std::string {
                   const int64_t mine = rows / size + (rank < rows % size ? 1 : 0);
                   int64_t first = 0;
                   for (int r = 0; r < rank; ++r)
                     first += rows / size + (r < rows % size ? 1 : 0);
                   if (h.output_shape() != shape_t{mine, cols})
                     return "shape " + to_string(h.output_shape());
                   buffer got(t, static_cast<size_t>(mine * cols));
                   got.bytes = h.output();
                   return compare(got, 0, got.count(), [&](size_t i) {
                     return reduce_reference(my, size, static_cast<size_t>(first * cols) + i,
                                             t, op, 1.0, 1.0);
                   });
                 }});
}

void add_allgather(std::vector<check>& out, unsigned& id, int rank, int size, data_type t) {
  ++id;
  const unsigned my = id;
  auto in = std::make_shared<buffer>(t, static_cast<size_t>((rank + 1) * 2));
  for (size_t i = 0; i < in->count(); ++i)
    in->set(i, value(my, rank, i, t, reduce_op::sum));
  auto name = label("allgather", t);
  out.push_back({name, [=] { return allgather(in->view({rank + 1, 2}), name); },
                 [=](const handle& h) -> std::string {
                   const int64_t rows = static_cast<int64_t>(size) * (size + 1) / 2;
                   if (h.output_shape() != shape_t{rows, 2})
                     return "shape " + to_string(h.output_shape());
                   buffer got(t, static_cast<size_t>(rows * 2));
                   got.bytes = h.output();
                   size_t k = 0;
                   for (int r = 0; r < size; ++r) {
                     const size_t n = static_cast<size_t>((r + 1) * 2);
                     auto err = compare(got, k, n, [&](size_t i) {
                       return value(my, r, i, t, reduce_op::sum);
                     });
                     if (!err.empty())
                       return "from rank " + std::to_string(r) + ": " + err;
                     k += n;
                   }
                   return {};
                 }});
}

void add_broadcast(std::vector<check>& out, unsigned& id, int rank, int root, data_type t) {
  ++id;
  const unsigned my = id;
  auto data = std::make_shared<buffer>(t, 19);
  for (size_t i = 0; i < 19; ++i)
    data->set(i, value(my, rank, i, t, reduce_op::sum));
  auto name = label("broadcast", t, "root" + std::to_string(root));
  out.push_back({name, [=] { return broadcast(data->view({19}), root, name); },
                 [=](const handle&) {
                   return compare(*data, 0, 19, [&](size_t i) {
                     return value(my, root, i, t, reduce_op::sum);
                   });
                 }});
}

// Rank r sends (r + d) % 3 rows to rank d (or equal splits of 2 rows).
void add_alltoall(std::vector<check>& out, unsigned& id, int rank, int size, data_type t,
                  bool equal) {
  ++id;
  const unsigned my = id;
  const int64_t cols = 2;
  auto rows_to = [=](int from, int to) -> int64_t { return equal ? 2 : (from + to) % 3; };
  std::vector<int64_t> splits;
  int64_t rows = 0;
  for (int d = 0; d < size; ++d) {
    splits.push_back(rows_to(rank, d));
    rows += splits.back();
  }
  auto in = std::make_shared<buffer>(t, static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < in->count(); ++i)
    in->set(i, value(my, rank, i, t, reduce_op::sum));
  auto name = label("alltoall", t, equal ? "equal" : "splits");
  if (equal)
    splits.clear();
  out.push_back({name, [=] { return alltoall(in->view({rows, cols}), name, splits); },
                 [=](const handle& h) -> std::string {
                   std::vector<int64_t> want_splits;
                   int64_t total = 0;
                   for (int r = 0; r < size; ++r) {
                     want_splits.push_back(rows_to(r, rank));
                     total += want_splits.back();
                   }
                   if (h.received_splits() != want_splits)
                     return "received splits differ";
                   if (h.output_shape() != shape_t{total, cols})
                     return "shape " + to_string(h.output_shape());
                   buffer got(t, static_cast<size_t>(total * cols));
                   got.bytes = h.output();
                   size_t k = 0;
                   for (int r = 0; r < size; ++r) {
                     int64_t offset = 0;  // rows r sends to ranks before me
                     for (int d = 0; d < rank; ++d)
                       offset += rows_to(r, d);
                     const size_t n = static_cast<size_t>(want_splits[static_cast<size_t>(r)] * cols);
                     auto err = compare(got, k, n, [&](size_t i) {
                       return value(my, r, static_cast<size_t>(offset * cols) + i, t,
                                    reduce_op::sum);
                     });
                     if (!err.empty())
                       return "from rank " + std::to_string(r) + ": " + err;
                     k += n;
                   }
                   return {};
                 }});
}

// Three float32 allreduces, two allgathers and six reducescatters, each set
// as one group.
void add_groups(std::vector<check>& out, unsigned& id, int rank, int size) {
  const unsigned base = ++id;
  id += 3;
  std::vector<std::shared_ptr<buffer>> ins, outs;
  for (unsigned k = 0; k < 3; ++k) {
    ins.push_back(std::make_shared<buffer>(data_type::float32, 5 + k));
    outs.push_back(std::make_shared<buffer>(data_type::float32, 5 + k));
    for (size_t i = 0; i < 5 + k; ++i)
      ins[k]->set(i, value(base + k, rank, i, data_type::float32, reduce_op::sum));
  }
  auto results = std::make_shared<std::vector<handle>>();
  out.push_back(
    {"grouped_allreduce",
     [=] {
       std::vector<tensor> in_views, out_views;
       for (unsigned k = 0; k < 3; ++k) {
         in_views.push_back(ins[k]->view({5 + static_cast<int64_t>(k)}));
         out_views.push_back(outs[k]->view({5 + static_cast<int64_t>(k)}));
       }
       *results = grouped_allreduce(in_views, out_views, "group.allreduce");
       return results->front();
     },
     [=](const handle&) -> std::string {
       for (unsigned k = 0; k < 3; ++k) {
         if (auto s = (*results)[k].wait(); !s.ok())
           return s.message();
         auto err = compare(*outs[k], 0, 5 + k, [&](size_t i) {
           return reduce_reference(base + k, size, i, data_type::float32, reduce_op::sum, 1, 1);
         });
         if (!err.empty())
           return "member " + std::to_string(k) + ": " + err;
       }
       return {};
     }});
  const unsigned gather_id = ++id;
  auto g = std::make_shared<buffer>(data_type::int32, static_cast<size_t>(rank + 1));
  for (size_t i = 0; i < g->count(); ++i)
    g->set(i, value(gather_id, rank, i, data_type::int32, reduce_op::sum));
  auto gathered = std::make_shared<std::vector<handle>>();
  out.push_back({"grouped_allgather",
                 [=] {
                   *gathered = grouped_allgather({g->view({rank + 1}), g->view({rank + 1})},
                                                 "group.allgather");
                   return gathered->back();
                 },
                 [=](const handle&) -> std::string {
                   for (const auto& h : *gathered) {
                     if (auto s = h.wait(); !s.ok())
                       return s.message();
                     if (h.output_shape() != shape_t{static_cast<int64_t>(size) * (size + 1) / 2})
                       return "shape " + to_string(h.output_shape());
                   }
                   return {};
                 }});
  // One group of float64 reducescatters, run as one fused reduce-scatter
  // (a few rows, uneven, fewer rows than ranks, none), but for one of 64
  // KiB or more, which runs on its own where it lies.
  const std::vector<shape_t> shapes{{size * 2},    {2 * size + 1, 3}, {1, 2},
                                    {0, 3},        {size * 1024 + 3, 8}, {size}};
  const unsigned rs_base = id + 1;
  id += static_cast<unsigned>(shapes.size());
  auto rs_in = std::make_shared<std::vector<std::shared_ptr<buffer>>>();
  for (size_t k = 0; k < shapes.size(); ++k) {
    rs_in->push_back(std::make_shared<buffer>(data_type::float64,
                                              static_cast<size_t>(num_elements(shapes[k]))));
    for (size_t i = 0; i < rs_in->back()->count(); ++i)
      rs_in->back()->set(i, value(rs_base + static_cast<unsigned>(k), rank, i, data_type::float64,
                                  reduce_op::sum));
  }
  auto scattered = std::make_shared<std::vector<handle>>();
  out.push_back({"grouped_reducescatter",
                 [=] {
                   std::vector<tensor> views;
                   for (size_t k = 0; k < shapes.size(); ++k)
                     views.push_back((*rs_in)[k]->view(shapes[k]));
                   *scattered = grouped_reducescatter(views, "group.reducescatter");
                   return scattered->front();
                 },
                 [=](const handle&) -> std::string {
                   for (size_t k = 0; k < shapes.size(); ++k) {
                     const auto& h = (*scattered)[k];
                     if (auto s = h.wait(); !s.ok())
                       return s.message();
                     const int64_t rows = shapes[k][0];
                     const int64_t row = num_elements(shape_t(shapes[k].begin() + 1, shapes[k].end()));
                     const int64_t mine = rows / size + (rank < rows % size ? 1 : 0);
                     int64_t first = 0;
                     for (int r = 0; r < rank; ++r)
                       first += rows / size + (r < rows % size ? 1 : 0);
                     auto want_shape = shapes[k];
                     want_shape[0] = mine;
                     if (h.output_shape() != want_shape)
                       return "member " + std::to_string(k) + ": shape " +
                              to_string(h.output_shape());
                     buffer got(data_type::float64, static_cast<size_t>(mine * row));
                     got.bytes = h.output();
                     auto err = compare(got, 0, got.count(), [&](size_t i) {
                       return reduce_reference(rs_base + static_cast<unsigned>(k), size,
                                               static_cast<size_t>(first * row) + i,
                                               data_type::float64, reduce_op::sum, 1, 1);
                     });
                     if (!err.empty())
                       return "member " + std::to_string(k) + ": " + err;
                   }
                   return {};
                 }});
}

} // namespace

std::vector<check> op_matrix(int rank, int size) {
  std::vector<check> checks;
  unsigned id = 0;
  for (auto t : all_dtypes) {
    for (auto op : {reduce_op::sum, reduce_op::average, reduce_op::min, reduce_op::max,
                    reduce_op::product}) {
      if (t == data_type::boolean && op == reduce_op::average)
        continue;
      add_allreduce(checks, id, rank, size, t, op, 1.0, 1.0);
    }
    if (t != data_type::boolean)
      add_allreduce(checks, id, rank, size, t, reduce_op::average, 0.5, 4.0);
    if (is_float(t) && (size & (size - 1)) == 0)
      add_adasum(checks, id, rank, size, t);
    add_reducescatter(checks, id, rank, size, t, reduce_op::sum);
    if (t != data_type::boolean)
      add_reducescatter(checks, id, rank, size, t, reduce_op::average);
    add_allgather(checks, id, rank, size, t);
    for (int root = 0; root < size; ++root)
      add_broadcast(checks, id, rank, root, t);
    add_alltoall(checks, id, rank, size, t, false);
    add_alltoall(checks, id, rank, size, t, true);
  }
  add_groups(checks, id, rank, size);
  checks.push_back({"barrier", [] { return barrier(); },
                    [](const handle&) { return std::string(); }});
  return checks;
}

std::vector<check> many_small(int rank, int size, int count) {
  std::vector<check> checks;
  for (int t = 0; t < count; ++t) {
    auto v = std::make_shared<buffer>(data_type::float32, 4);
    const auto id = static_cast<unsigned>(100000 + t);
    for (size_t i = 0; i < 4; ++i)
      v->set(i, value(id, rank, i, data_type::float32, reduce_op::sum));
    const std::string name = "small." + std::to_string(t);
    checks.push_back({name, [=] { return allreduce(v->view({4}), v->view({4}), name); },
                      [=](const handle&) {
                        return compare(*v, 0, 4, [&](size_t i) {
                          return reduce_reference(id, size, i, data_type::float32,
                                                  reduce_op::sum, 1.0, 1.0);
                        });
                      }});
  }
  return checks;
}

std::string support_matrix(const std::vector<std::string>& passed, const std::string& backend,
                           int size) {
  struct row {
    const char* label;
    std::string prefix;
    std::string suffix;
  };
  const std::vector<row> rows{
    {"allreduce sum", "allreduce.", ".sum"},
    {"allreduce average", "allreduce.", ".average"},
    {"allreduce min", "allreduce.", ".min"},
    {"allreduce max", "allreduce.", ".max"},
    {"allreduce product", "allreduce.", ".product"},
    {"allreduce pre/postscale", "allreduce.", ".average.scaled"},
    {"allreduce adasum", "allreduce.", ".adasum"},
    {"reducescatter sum", "reducescatter.", ".sum"},
    {"reducescatter average", "reducescatter.", ".average"},
    {"allgather", "allgather.", ""},
    {"broadcast (every root)", "broadcast.", ".root0"},
    {"alltoall with splits", "alltoall.", ".splits"},
    {"alltoall equal split", "alltoall.", ".equal"},
  };
  std::string out = "### " + backend + " (" + std::to_string(size) + " ranks)\n\n| op |";
  for (auto t : all_dtypes)
    out += std::string(" ") + to_string(t) + " |";
  out += "\n|---|";
  for (size_t i = 0; i < std::size(all_dtypes); ++i)
    out += "---|";
  out += "\n";
  for (const auto& r : rows) {
    out += std::string("| ") + r.label + " |";
    for (auto t : all_dtypes) {
      const auto name = r.prefix + to_string(t) + r.suffix;
      out += std::find(passed.begin(), passed.end(), name) != passed.end() ? " yes |" : " - |";
    }
    out += "\n";
  }
  return out + "\nGrouped allreduce / allgather / reducescatter, barrier and join are " +
         "checked separately (dtype-independent).\n";
}

int run_checks(std::vector<check> checks, int rank, const char* what,
               std::vector<std::string>* passed) {
  // Each rank submits in its own random order; the coordinator's order wins.
  std::mt19937 gen(1234 + static_cast<unsigned>(rank));
  std::shuffle(checks.begin(), checks.end(), gen);
  std::vector<handle> handles;
  for (auto& c : checks)
    handles.push_back(c.submit());
  int failures = 0;
  for (size_t i = 0; i < checks.size(); ++i) {
    auto s = handles[i].wait();
    std::string problem = s.ok() ? checks[i].verify(handles[i]) : s.message();
    if (!problem.empty()) {
      ++failures;
      std::printf("rank %d: FAIL %s: %s\n", rank, checks[i].name.c_str(), problem.c_str());
    } else if (passed) {
      passed->push_back(checks[i].name);
    }
  }
  if (failures == 0)
    std::printf("rank %d: PASS %zu %s\n", rank, checks.size(), what);
  return failures == 0 ? 0 : 1;
}

bool allreduce_series(int rank, int size, const std::string& prefix, int n) {
  for (int i = 0; i < n; ++i) {
    float x = static_cast<float>(rank);
    const tensor t{&x, data_type::float32, {1}};
    if (!allreduce(t, t, prefix + "." + std::to_string(i)).wait().ok() ||
        x != static_cast<float>(size * (size - 1) / 2))
      return false;
  }
  return true;
}

} // namespace troupe::test
