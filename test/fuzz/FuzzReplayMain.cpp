//===- FuzzReplayMain.cpp - replay a fuzz corpus without libFuzzer --------===//
//
// usage: zen-<target>-fuzz-replay CORPUS_DIR [MUTATIONS_PER_SEED]
// Runs every corpus file through LLVMFuzzerTestOneInput, then deterministic mutations
// of each (truncations, bit flips, byte overwrites, splices; fixed seed). A bug aborts.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {
void run(const std::string &bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
}

std::string mutate(const std::string &seed, const std::string &other, std::mt19937 &rng) {
  std::string bytes = seed;
  if (bytes.empty())
    return other.substr(0, rng() % (other.size() + 1));
  switch (rng() % 4) {
  case 0:  // truncate
    bytes.resize(rng() % bytes.size());
    break;
  case 1:  // flip a few bits
    for (int i = 0, n = 1 + rng() % 4; i < n; ++i)
      bytes[rng() % bytes.size()] ^= static_cast<char>(1u << (rng() % 8));
    break;
  case 2:  // overwrite a byte with an interesting value
    bytes[rng() % bytes.size()] = "\x00\x01\x7f\x80\xff-9"[rng() % 7];
    break;
  default:  // splice the tail of another input
    bytes = bytes.substr(0, rng() % bytes.size()) + other.substr(rng() % (other.size() + 1));
  }
  return bytes;
}
} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: " << argv[0] << " CORPUS_DIR [MUTATIONS_PER_SEED]\n";
    return 2;
  }
  long mutations = argc == 3 ? std::strtol(argv[2], nullptr, 10) : 50;
  std::vector<std::string> seeds;
  for (const auto &entry : std::filesystem::directory_iterator(argv[1])) {
    if (!entry.is_regular_file())
      continue;
    std::ifstream file(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << file.rdbuf();
    seeds.push_back(bytes.str());
  }
  if (seeds.empty()) {
    std::cerr << argv[1] << ": empty corpus\n";
    return 1;
  }
  std::sort(seeds.begin(), seeds.end());  // directory order is not deterministic
  std::mt19937 rng(20240601);
  long inputs = 0;
  for (const std::string &seed : seeds) {
    run(seed);
    ++inputs;
    for (long i = 0; i < mutations; ++i, ++inputs)
      run(mutate(seed, seeds[rng() % seeds.size()], rng));
  }
  std::cout << "ran " << inputs << " inputs from " << seeds.size() << " seeds\n";
  return 0;
}
