// Times Pinocchio's own C++ calls (no Python in between) on a URDF model, so
// that gear's batched per-state times can be compared against them.
// Built and run by benchmarks/pin_cpp.py when the pin wheel's headers and
// Eigen are available.  The model is built in Python (pinocchio's own URDF
// parser) and saved with Model.saveToBinary.  Usage: pin_bench MODEL.bin reps
// Prints one line per algorithm: "<name> <ns per call>".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <pinocchio/multibody.hpp>
#include <pinocchio/serialization.hpp>
#include <pinocchio/algorithm/joint-configuration.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/crba.hpp>
#include <pinocchio/algorithm/rnea-derivatives.hpp>
#include <pinocchio/algorithm/aba-derivatives.hpp>

using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s model.bin reps\n", argv[0]);
    return 2;
  }
  pinocchio::Model model;
  model.loadFromBinary(argv[1]);
  pinocchio::Data data(model);
  const int reps = std::atoi(argv[2]);
  const int nstates = 64;
  std::vector<Eigen::VectorXd> q(nstates), v(nstates), a(nstates);
  std::srand(0);
  model.lowerPositionLimit.setConstant(-3.0);
  model.upperPositionLimit.setConstant(3.0);
  for (int k = 0; k < nstates; ++k) {
    q[k] = pinocchio::randomConfiguration(model);
    v[k] = Eigen::VectorXd::Random(model.nv);
    a[k] = Eigen::VectorXd::Random(model.nv);
  }
  double sink = 0.0;
  auto time = [&](const char* name, auto&& fn) {
    for (int k = 0; k < nstates; ++k) fn(k);  // warm up
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) fn(r % nstates);
    double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / reps;
    std::printf("%s %.2f\n", name, ns);
  };
  time("rnea", [&](int k) { sink += pinocchio::rnea(model, data, q[k], v[k], a[k])[0]; });
  time("aba", [&](int k) { sink += pinocchio::aba(model, data, q[k], v[k], a[k])[0]; });
  time("crba", [&](int k) { sink += pinocchio::crba(model, data, q[k])(0, 0); });
  time("rnea_derivatives", [&](int k) {
    pinocchio::computeRNEADerivatives(model, data, q[k], v[k], a[k]);
    sink += data.dtau_dq(0, 0);
  });
  time("aba_derivatives", [&](int k) {
    pinocchio::computeABADerivatives(model, data, q[k], v[k], a[k]);
    sink += data.ddq_dq(0, 0);
  });
  std::fprintf(stderr, "checksum %g\n", sink);
  return 0;
}
